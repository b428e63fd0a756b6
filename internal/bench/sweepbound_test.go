package bench

import (
	"math"
	"math/rand"
	"testing"
)

// fluidSweep is a fluid model of roam bench sweep's full sweep: its jobs
// (sweepJobs), make demo's nodes with memory for 8, 4, 4 and 2 of them,
// the queue releasing the lowest index first onto the least loaded node
// with room, and each node's CPU shared equally by the jobs it runs
// (pooled: the cluster's CPU shared by all, each job at most one node's,
// as perfect and free migration would make it). The background takes
// two thirds of node 2 while busy, busy and idle in turn for random 0–5
// s: a third of it on average. quantum > 0 is the queue's second level:
// a job that has had quantum CPU-seconds while fresh jobs wait leaves
// its room and goes behind them, frozen cost seconds at its preemption
// and again at its restore, holding its room meanwhile. It returns the
// mean slowdown ((end − 0) / CPU length) and the makespan.
func fluidSweep(jobs []sweepJob, pooled bool, quantum, cost float64) (meanSlowdown, makespan float64) {
	const dt = 0.05
	n := len(jobs)
	rem, att, pen := make([]float64, n), make([]float64, n), make([]float64, n)
	node, end := make([]int, n), make([]float64, n)
	for i, j := range jobs {
		rem[i], node[i], end[i] = j.cpu, -1, -1
	}
	fresh := make([]int, n)
	for i := range fresh {
		fresh[i] = i
	}
	var back []int
	bg := rand.New(rand.NewSource(2))
	busy, toggle := false, 0.0
	left := n
	maxCap := 0.0
	for _, c := range sweepCPU {
		maxCap = math.Max(maxCap, c)
	}
	for t := 0.0; left > 0 && t < 5000; t += dt {
		if t >= toggle {
			busy, toggle = !busy, t+bg.Float64()*sweepBgMax
		}
		cpu := append([]float64(nil), sweepCPU...)
		if busy {
			cpu[1] /= 3
		}
		count, mem := make([]int, len(cpu)), make([]float64, len(cpu))
		var running []int
		for i := range jobs {
			if node[i] >= 0 && end[i] < 0 {
				running = append(running, i)
				count[node[i]]++
				mem[node[i]] += 256
			}
		}
		for len(fresh)+len(back) > 0 {
			q := &fresh
			if len(fresh) == 0 {
				q = &back
			}
			i, best := (*q)[0], -1
			for k := range cpu {
				if mem[k]+256 <= float64(sweepMemMB[k]) && (best < 0 || float64(count[k]+1)/sweepCPU[k] < float64(count[best]+1)/sweepCPU[best]) {
					best = k
				}
			}
			if best < 0 {
				break
			}
			*q = (*q)[1:]
			node[i] = best
			count[best]++
			mem[best] += 256
			running = append(running, i)
			if att[i] > 0 {
				pen[i] += cost // its restore
			}
		}
		total := 0.0
		for _, c := range cpu {
			total += c
		}
		for _, i := range running {
			share := cpu[node[i]] / float64(count[node[i]])
			if pooled {
				share = math.Min(total/float64(len(running)), maxCap)
			}
			if pen[i] > 0 {
				pen[i] -= dt
				continue
			}
			rem[i] -= share * dt
			att[i] += share * dt
			switch {
			case rem[i] <= 1e-9:
				end[i] = t + dt
				left--
			case quantum > 0 && att[i] >= quantum && att[i]-share*dt < quantum && len(fresh) > 0:
				node[i] = -1
				back = append(back, i)
				pen[i] += cost // its checkpoint
			}
		}
	}
	for i, j := range jobs {
		meanSlowdown += end[i] / j.cpu / float64(n)
		makespan = math.Max(makespan, end[i])
	}
	return meanSlowdown, makespan
}

// Issue 43's target for roam bench sweep, roam's mean slowdown at most
// two thirds of static placement's, is at the bound of what a schedule
// that does not know the jobs' lengths reaches on this sweep, in a fluid
// model of it (fluidSweep) whose static and pooled sides agree with the
// measured ones (docs/benchmarks.md, sweep): migration alone, perfect
// and free, takes back no more than the background's share, and only
// the queue's second level, with its checkpoints free and instant, comes
// near two thirds. Each real checkpoint's CPU comes out of the same
// CPUs. The numbers are logged (go test -v): docs/benchmarks.md cites
// them.
func TestSweepTargetIsAtTheBound(t *testing.T) {
	jobs := sweepJobs(sweepFull)
	static, staticSpan := fluidSweep(jobs, false, 0, 0)
	pooled, pooledSpan := fluidSweep(jobs, true, 0, 0)
	t.Logf("static: mean slowdown %.0f, makespan %.0f s; pooled (perfect free migration): %.0f (%.3f of static's), %.0f s", static, staticSpan, pooled, pooled/static, pooledSpan)
	if r := pooled / static; r < 0.9 || r > 1.02 {
		t.Errorf("perfect free migration gives %.3f of static's mean slowdown; the docs say it takes back the background's share and no more (0.9 to 1.02)", r)
	}
	best, bestAt := math.Inf(1), 0.0
	for _, q := range []float64{0.2, 0.3, 0.4, 0.5, 0.7, 1, 2} {
		s, span := fluidSweep(jobs, true, q, 0)
		t.Logf("second level at %.1f CPU-s, checkpoints free: mean slowdown %.0f (%.3f of static's), makespan %.0f s", q, s, s/static, span)
		if s/static < best {
			best, bestAt = s/static, q
		}
	}
	// The best quantum meets the target with free checkpoints, and no
	// more than just: one frozen a little at each end misses it.
	if best > sweepTarget || best < 0.6 {
		t.Errorf("the best second level with free checkpoints (%.1f CPU-s) gives %.3f of static's mean slowdown; the docs say just under the target %.3f", bestAt, best, sweepTarget)
	}
	for _, cost := range []float64{0.3, 1} {
		s, span := fluidSweep(jobs, true, bestAt, cost)
		t.Logf("second level at %.1f CPU-s, each checkpoint and restore frozen %.1f s: mean slowdown %.0f (%.3f of static's), makespan %.0f s", bestAt, cost, s, s/static, span)
		if s/static <= sweepTarget {
			t.Errorf("with each checkpoint and restore frozen %.1f s the second level gives %.3f of static's mean slowdown; the docs say it misses the target %.3f", cost, s/static, sweepTarget)
		}
	}
}
