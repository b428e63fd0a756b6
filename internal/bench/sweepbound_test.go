package bench

import (
	"math"
	"math/rand"
	"testing"

	"roam/internal/resources"
)

// fluidSweep is a fluid model of roam bench sweep's full sweep: its jobs
// (sweepJobs), make demo's nodes with memory for 8, 4, 4 and 2 of them,
// the queue releasing the lowest index first onto the least loaded node
// with room, and each node's CPU shared equally by the jobs it runs
// (pooled: the cluster's CPU shared by all, each job at most one node's,
// as perfect and free migration would make it). The background takes
// two thirds of node 2 while busy, busy and idle in turn for random 0–5
// s: a third of it on average. quanta are the queue's further levels
// (none: one level): a job that has had quanta[k] CPU-seconds while
// jobs of a lower level than k+1 wait leaves its room and goes behind
// them, to level k+1, its checkpoint and its restore each taking cost
// CPU-seconds of its share (CRIU's work) while it holds its room; the
// queue releases the lowest level first. It returns the mean slowdown ((end − 0) / CPU length) and
// the makespan.
func fluidSweep(jobs []sweepJob, pooled bool, quanta []float64, cost float64) (meanSlowdown, makespan float64) {
	const dt = 0.05
	b, _ := resources.ParseMem(sweepMemReq) // every job's --mem
	req := float64(b >> 20)
	n := len(jobs)
	rem, att, pen := make([]float64, n), make([]float64, n), make([]float64, n)
	node, end := make([]int, n), make([]float64, n)
	for i, j := range jobs {
		rem[i], node[i], end[i] = j.cpu, -1, -1
	}
	levels := make([][]int, len(quanta)+1) // the queue, by level
	for i := range n {
		levels[0] = append(levels[0], i)
	}
	level := make([]int, n)
	waiting := func(below int) bool {
		for k := range below {
			if len(levels[k]) > 0 {
				return true
			}
		}
		return false
	}
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
				mem[node[i]] += req
			}
		}
		for waiting(len(levels)) {
			q := &levels[0]
			for k := 0; len(*q) == 0; k++ {
				q = &levels[k+1]
			}
			i, best := (*q)[0], -1
			for k := range cpu {
				if mem[k]+req <= float64(sweepMemMB[k]) && (best < 0 || float64(count[k]+1)/sweepCPU[k] < float64(count[best]+1)/sweepCPU[best]) {
					best = k
				}
			}
			if best < 0 {
				break
			}
			*q = (*q)[1:]
			node[i] = best
			count[best]++
			mem[best] += req
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
				pen[i] -= share * dt // CRIU's work, out of the job's share
				continue
			}
			rem[i] -= share * dt
			att[i] += share * dt
			switch {
			case rem[i] <= 1e-9:
				end[i] = t + dt
				left--
			case level[i] < len(quanta) && att[i] >= quanta[level[i]] && waiting(level[i]+1):
				node[i] = -1
				level[i]++
				levels[level[i]] = append(levels[level[i]], i)
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
// two thirds of static placement's with a makespan at most 1.15 times
// the ideal, is out of reach of a schedule that does not know the jobs'
// lengths, in a fluid model of this very sweep (fluidSweep) whose static
// and pooled sides agree with the measured ones (docs/benchmarks.md,
// sweep). Migration alone, perfect and free, takes back no more than
// the background's share. Only a queue that preempts long jobs out of
// memory comes near two thirds, and only with free checkpoints; at what
// a checkpoint and a restore cost here (about 0.5 CPU-seconds each for
// the sweep's mean job of 100 MiB: 11 ms a MiB, docs/benchmarks.md)
// every such queue misses both targets. The numbers are logged (go test
// -v): docs/benchmarks.md cites them.
func TestSweepTargetIsAtTheBound(t *testing.T) {
	jobs := sweepJobs(sweepFull)
	ideal := 0.0
	for _, j := range jobs {
		ideal += j.cpu
	}
	ideal /= capacitySum(sweepCaps())
	static, staticSpan := fluidSweep(jobs, false, nil, 0)
	pooled, pooledSpan := fluidSweep(jobs, true, nil, 0)
	t.Logf("static: mean slowdown %.0f, makespan %.0f s (ideal %.0f s); pooled (perfect free migration): %.0f (%.3f of static's), %.0f s", static, staticSpan, ideal, pooled, pooled/static, pooledSpan)
	if r := pooled / static; r < 0.9 || r > 1.02 {
		t.Errorf("perfect free migration gives %.3f of static's mean slowdown; the docs say it takes back the background's share and no more (0.9 to 1.02)", r)
	}
	queues := [][]float64{{0.2}, {0.3}, {0.4}, {0.5}, {0.7}, {1}, {2}, {0.5, 2}, {0.7, 1.4, 2.8}, {0.5, 1, 2, 4}, {0.5, 1, 1.5, 2, 3, 4, 6, 8, 12}}
	best := math.Inf(1)
	for _, qs := range queues {
		free, _ := fluidSweep(jobs, true, qs, 0)
		paid, paidSpan := fluidSweep(jobs, true, qs, 0.5)
		t.Logf("preempted at %v CPU-s: %.3f of static's mean slowdown with free checkpoints; %.3f, makespan %.2f × the ideal, with 0.5 CPU-s each", qs, free/static, paid/static, paidSpan/ideal)
		best = math.Min(best, free/static)
		if paid/static <= sweepTarget && paidSpan/ideal <= sweepMakespanTarget {
			t.Errorf("preempted at %v CPU-s with 0.5 CPU-s checkpoints: %.3f of static's mean slowdown, %.2f × the ideal: both targets met; the docs say no such queue meets them", qs, paid/static, paidSpan/ideal)
		}
	}
	if best > sweepTarget || best < 0.6 {
		t.Errorf("the best queue with free checkpoints gives %.3f of static's mean slowdown; the docs say just under the target %.3f", best, sweepTarget)
	}
}
