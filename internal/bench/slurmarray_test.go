package bench

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
)

// arrayModel is a fluid model of scripts/bench-slurm-array.sh (issue 46,
// line 3): nodes of cpu CPU each, one of them (node 2) losing bgShare of
// its CPU while a background load is busy, busy and idle in turn for
// random times between bgMin and bgMax seconds.
type arrayModel struct {
	nodes              int
	cpu                float64
	bgShare            float64
	bgMin, bgMax       float64
	dispatch, start    float64 // s: Slurm's dispatch of a task, roam's start of a job
	freeze, movePeriod float64 // s: a move's freeze, the policy's time between moves
	minLen, maxLen     float64 // the sweep's lengths in CPU-s (sweepLength)
}

// slurmModel is the script's setting: 4 nodes of 0.25 CPU, the lengths
// as `roam bench sweep` draws them, Slurm's dispatch of a task 0.15 s,
// roam's start of a job 0.3 s, a move freezing its job 0.5 s, one move a
// second.
var slurmModel = arrayModel{nodes: 4, cpu: 0.25, dispatch: 0.15, start: 0.3, freeze: 0.5, movePeriod: 1, minLen: 0.2, maxLen: 8}

// draw draws a sweep of n jobs as the script's awk does (another
// generator: the same distribution, not the same jobs).
func (m arrayModel) draw(rng *rand.Rand, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = sweepLength(rng.Float64(), m.minLen, m.maxLen)
	}
	return out
}

// arraySim is one side's state in run.
type arraySim struct {
	m          arrayModel
	perCPU     int // 0: the array, one task a node; else roam's jobs at once a CPU
	rem, att   []float64
	hold, end  []float64 // s a job still waits for (dispatch, start, a move's freeze); its end, or -1
	node       []int     // -1 before it starts
	next, left int
}

// run plays one side of a sweep against a background drawn from bgSeed
// and returns its makespan and mean slowdown (end / CPU length, the
// submission at 0). perCPU 0 is the array: each node runs one task at a
// time, the next index starting where one ends. Otherwise roam runs
// perCPU jobs a CPU at once, the rest pending, each started on the node
// where it would get the most CPU, and moves one job every movePeriod
// from the node whose jobs get the least CPU to the node where a
// newcomer would get the most, when that is more.
func (m arrayModel) run(jobs []float64, perCPU int, bgSeed int64) (makespan, slowdown float64) {
	const dt = 0.01
	n := len(jobs)
	s := &arraySim{m: m, perCPU: perCPU, rem: append([]float64(nil), jobs...), att: make([]float64, n), hold: make([]float64, n), end: make([]float64, n), node: make([]int, n), left: n}
	for i := range n {
		s.node[i], s.end[i] = -1, -1
	}
	bg := rand.New(rand.NewSource(bgSeed))
	busy, toggle, lastMove := bg.Intn(2) == 1, 0.0, 0.0
	for t := 0.0; s.left > 0 && t < 1e5; t += dt {
		if t >= toggle {
			busy, toggle = !busy, t+m.bgMin+bg.Float64()*(m.bgMax-m.bgMin)
		}
		cpu := make([]float64, m.nodes)
		for k := range cpu {
			cpu[k] = m.cpu
		}
		if busy {
			cpu[1] *= 1 - m.bgShare
		}
		s.release(cpu)
		if perCPU > 0 && t-lastMove >= m.movePeriod {
			lastMove = t
			s.move(cpu)
		}
		s.step(cpu, t, dt)
	}
	for i, l := range jobs {
		makespan = math.Max(makespan, s.end[i])
		slowdown += s.end[i] / l / float64(n)
	}
	return makespan, slowdown
}

// counts is how many unfinished jobs each node runs.
func (s *arraySim) counts() []int {
	c := make([]int, s.m.nodes)
	for i, k := range s.node {
		if k >= 0 && s.end[i] < 0 {
			c[k]++
		}
	}
	return c
}

// release starts pending jobs in index order while there is room.
func (s *arraySim) release(cpu []float64) {
	c := s.counts()
	running := 0
	for _, x := range c {
		running += x
	}
	for s.next < len(s.rem) {
		best := -1
		for k := range cpu {
			switch {
			case s.perCPU == 0 && c[k] == 0 && best < 0:
				best = k
			case s.perCPU > 0 && running < s.perCPU*s.m.nodes && (best < 0 || cpu[k]/float64(c[k]+1) > cpu[best]/float64(c[best]+1)):
				best = k
			}
		}
		if best < 0 {
			return
		}
		s.node[s.next], s.hold[s.next] = best, s.m.start
		if s.perCPU == 0 {
			s.hold[s.next] = s.m.dispatch
		}
		c[best]++
		running++
		s.next++
	}
}

// move moves the job with the least CPU-time on the node whose jobs get
// the least CPU to the node where a newcomer would get the most, if it
// gets more there.
func (s *arraySim) move(cpu []float64) {
	c := s.counts()
	lo, hi := -1, -1
	for k := range cpu {
		if c[k] > 0 && (lo < 0 || cpu[k]/float64(c[k]) < cpu[lo]/float64(c[lo])) {
			lo = k
		}
		if hi < 0 || cpu[k]/float64(c[k]+1) > cpu[hi]/float64(c[hi]+1) {
			hi = k
		}
	}
	if lo < 0 || hi == lo || cpu[hi]/float64(c[hi]+1) <= cpu[lo]/float64(c[lo]) {
		return
	}
	v := -1
	for i, k := range s.node {
		if k == lo && s.end[i] < 0 && s.hold[i] <= 0 && (v < 0 || s.att[i] < s.att[v]) {
			v = i
		}
	}
	if v >= 0 {
		s.node[v], s.hold[v] = hi, s.m.freeze
	}
}

// step shares each node's CPU equally among its jobs that are not held
// for dt seconds.
func (s *arraySim) step(cpu []float64, t, dt float64) {
	share := make([]int, len(cpu))
	for i, k := range s.node {
		if k >= 0 && s.end[i] < 0 && s.hold[i] <= 0 {
			share[k]++
		}
	}
	for i, k := range s.node {
		switch {
		case k < 0 || s.end[i] >= 0:
		case s.hold[i] > 0:
			s.hold[i] -= dt
		default:
			got := cpu[k] / float64(share[k]) * dt
			s.rem[i] -= got
			s.att[i] += got
			if s.rem[i] <= 1e-9 {
				s.end[i] = t + dt
				s.left--
			}
		}
	}
}

// arrayRatios is roam (perCPU jobs a CPU) over the array in sweeps of n
// jobs: the geometric means of the makespans' and mean slowdowns' ratios,
// their standard deviations (of the logarithms), and the rounds an
// interleaved benchmark needs for the makespan's 95 % interval to end
// below 1.
func (m arrayModel) arrayRatios(perCPU, n, sweeps int) (makespan, slowdown, sdMakespan, sdSlowdown, rounds float64) {
	rng := rand.New(rand.NewSource(46))
	var lm, ls []float64
	for s := range sweeps {
		jobs := m.draw(rng, n)
		am, as := m.run(jobs, 0, int64(s))
		rm, rs := m.run(jobs, perCPU, int64(s))
		lm, ls = append(lm, math.Log(rm/am)), append(ls, math.Log(rs/as))
	}
	mm, sm := meanStd(lm)
	ms, ss := meanStd(ls)
	return math.Exp(mm), math.Exp(ms), sm, ss, math.Pow(2.1*sm/mm, 2)
}

// Issue 46's line 3 asks roam inside an allocation to finish the sweep
// in less time than a Slurm job array, and with a lower mean slowdown.
// The model says where that can be shown. With the background busy and
// idle for 0–5 s (seed 002's), a job on the loaded node meets busy and
// idle spells alike on either side, and roam's makespan is about 1 %
// under the array's: some 500 interleaved rounds would be needed to tell
// them apart. With spells of 10–30 s (another tenant's bursts), a job
// the array starts on the loaded node stays slow for its run, and roam,
// moving work off it, ends a sweep of 96 jobs about 4 % sooner, which
// some 14 interleaved rounds show on average (make bench-slurm-array
// runs 24). At 48 jobs the gain is no smaller, but which job comes last
// spreads the makespan more. The mean slowdown is lower by a tenth or
// more in every case. It logs (go test -v) these numbers and a table of
// other rules (jobs a CPU) under other backgrounds, which
// docs/benchmarks.md (slurm-array) gives beside the measured ones.
func TestSlurmArrayModelSaysWhereRoamWins(t *testing.T) {
	if testing.Verbose() {
		logArrayRules(t)
	}
	short := slurmModel
	short.bgShare, short.bgMin, short.bgMax = 0.9, 0, 5
	long := slurmModel
	long.bgShare, long.bgMin, long.bgMax = 0.75, 10, 30
	for _, c := range []struct {
		name      string
		m         arrayModel
		jobs      int
		lo, hi    float64 // the makespan ratio's bounds
		maxRounds float64 // the rounds to show it, at most (0: not checked)
		minRounds float64 // the rounds to show it, at least (0: not checked)
	}{
		{"background 0.9 of node 2, spells of 0–5 s, 48 jobs (the runs measured first)", short, 48, 0.98, 1.02, 0, 100},
		{"background 0.75 of node 2, spells of 10–30 s, 48 jobs", long, 48, 0.9, 0.98, 0, 0},
		{"background 0.75 of node 2, spells of 10–30 s, 96 jobs (make bench-slurm-array)", long, 96, 0.9, 0.97, 16, 0},
	} {
		mk, sl, sdm, sds, rounds := c.m.arrayRatios(3, c.jobs, 120)
		t.Logf("%s: roam / array: makespan %.3f (sd %.3f; %.0f rounds to show it), mean slowdown %.3f (sd %.3f)", c.name, mk, sdm, rounds, sl, sds)
		if mk < c.lo || mk > c.hi {
			t.Errorf("%s: makespan ratio %.3f, outside %.2f to %.2f", c.name, mk, c.lo, c.hi)
		}
		if c.maxRounds > 0 && rounds > c.maxRounds {
			t.Errorf("%s: %.0f rounds to show the makespan; make bench-slurm-array's 24 need it to take at most %.0f", c.name, rounds, c.maxRounds)
		}
		if rounds < c.minRounds {
			t.Errorf("%s: %.0f rounds would show the makespan; the docs say this setting cannot show it (at least %.0f)", c.name, rounds, c.minRounds)
		}
		if sl > 0.9 {
			t.Errorf("%s: mean slowdown ratio %.3f, not lower by a tenth", c.name, sl)
		}
	}
}

// logArrayRules logs roam's rules (jobs at once a CPU; 100: all at once)
// over the array, as makespan and mean slowdown ratios, under several
// backgrounds.
func logArrayRules(t *testing.T) {
	for _, bg := range [][3]float64{{0.5, 0, 5}, {0.9, 0, 5}, {1, 0, 5}, {0.9, 5, 20}, {0.75, 10, 30}} {
		m := slurmModel
		m.bgShare, m.bgMin, m.bgMax = bg[0], bg[1], bg[2]
		for _, n := range []int{48, 96} {
			line := ""
			for _, perCPU := range []int{1, 2, 3, 4, 100} {
				mk, sl, _, _, _ := m.arrayRatios(perCPU, n, 60)
				line += fmt.Sprintf(" | %.3f, %.3f", mk, sl)
			}
			t.Logf("| %.2f, %g–%g s | %d%s |", bg[0], bg[1], bg[2], n, line)
		}
	}
}
