package bench

import (
	"math"
	"math/rand"
	"slices"
	"testing"
)

// fluidSweep is a fluid model of roam bench sweep's full sweep: its jobs
// (sweepJobs), each asking its class of memory, on make demo's nodes
// with memory of sweepMemMB, the queue releasing the lowest index first
// (the rest waiting while it has no room) onto a node with room for it,
// placed and shared as side says (fluidSide): each node's CPU shared
// equally by the jobs it runs, or the cluster's by all of them, each job
// at most one node's, as perfect and free migration would make it. The
// background takes
// two thirds of node 2 while busy, busy and idle in turn for random 0–5
// s: a third of it on average. quanta are the queue's further levels
// (none: one level): a job that has had quanta[k] CPU-seconds while
// jobs of a lower level than k+1 wait leaves its room and goes behind
// them, to level k+1, its checkpoint and its restore each taking cost
// CPU-seconds of its share (CRIU's work) while it holds its room; the
// queue releases the lowest level first. prio are levels of CPU
// priority instead (none: equal shares): a node's CPU (pooled: the
// cluster's) goes to its jobs of the lowest level first, a job's level
// being how many of prio its CPU-seconds have passed: strict priority by
// attained service, the limit of CPU weights, with no checkpoint. It returns the mean
// slowdown ((end − 0) / CPU length) and the makespan.
func fluidSweep(jobs []sweepJob, side fluidSide, quanta []float64, cost float64, prio []float64) (meanSlowdown, makespan float64) {
	pooled := side == fluidPooled
	const dt = 0.05
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
	rr := 0 // round-robin's next node
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
				mem[node[i]] += float64(jobs[i].mib)
			}
		}
		for waiting(len(levels)) {
			q := &levels[0]
			for k := 0; len(*q) == 0; k++ {
				q = &levels[k+1]
			}
			i := (*q)[0]
			best := fluidPlace(side, jobs[i].mib, mem, count, &rr)
			if best < 0 {
				break
			}
			*q = (*q)[1:]
			node[i] = best
			count[best]++
			mem[best] += float64(jobs[i].mib)
			running = append(running, i)
			if att[i] > 0 {
				pen[i] += cost // its restore
			}
		}
		shares := fluidShares(running, node, att, cpu, pooled, maxCap, prio)
		for _, i := range running {
			share := shares[i]
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

// fluidSide is how a side of the model places and shares: static's
// round-robin (sched.PlaceRoundRobin: the next node in turn with room)
// and each node's CPU its own; roam's least-loaded placement, each node's
// CPU its own (a queue without migration); or least-loaded with the
// cluster's CPU pooled, as perfect and free migration would make it.
type fluidSide int

const (
	fluidStatic fluidSide = iota
	fluidLocal
	fluidPooled
)

// fluidPlace is the node a job of mib MiB starts on, with mem MiB held
// and count jobs on each node, -1 for none with room; rr is
// round-robin's next node.
func fluidPlace(side fluidSide, mib int, mem []float64, count []int, rr *int) int {
	fits := func(k int) bool { return mem[k]+float64(mib) <= float64(sweepMemMB[k]) }
	if side == fluidStatic {
		for range sweepCPU {
			k := *rr % len(sweepCPU)
			*rr++
			if fits(k) {
				return k
			}
		}
		return -1
	}
	best := -1
	for k := range sweepCPU {
		if fits(k) && (best < 0 || float64(count[k]+1)/sweepCPU[k] < float64(count[best]+1)/sweepCPU[best]) {
			best = k
		}
	}
	return best
}

// fluidShares is the CPU each running job gets: each node's (pooled: the
// cluster's, each job at most maxCap) shared equally among its jobs of
// the lowest level of prio (attained CPU-seconds), what they leave going
// to the next level.
func fluidShares(running, node []int, att, cpu []float64, pooled bool, maxCap float64, prio []float64) map[int]float64 {
	level := map[int]int{} // a running job's level, once a call
	for _, i := range running {
		for level[i] < len(prio) && att[i] >= prio[level[i]] {
			level[i]++
		}
	}
	pool := func(i int) int { // the CPU a job draws from
		if pooled {
			return 0
		}
		return node[i]
	}
	left, limit := append([]float64(nil), cpu...), math.Inf(1)
	if pooled {
		left, limit = []float64{0}, maxCap
		for _, c := range cpu {
			left[0] += c
		}
	}
	out := map[int]float64{}
	for k := 0; k <= len(prio); k++ {
		count := make([]int, len(left))
		for _, i := range running {
			if level[i] == k {
				count[pool(i)]++
			}
		}
		used := make([]float64, len(left))
		for _, i := range running {
			if p := pool(i); level[i] == k {
				out[i] = math.Min(left[p]/float64(count[p]), limit)
				used[p] += out[i]
			}
		}
		for p := range left {
			left[p] -= used[p]
		}
	}
	return out
}

// Issue 43's target for roam bench sweep, roam's mean slowdown at most
// two thirds of static placement's with a makespan at most 1.15 times
// the ideal, is out of reach of a schedule that does not know the jobs'
// lengths, in a fluid model of this very sweep (fluidSweep) whose static
// and pooled sides agree with the measured ones (docs/benchmarks.md,
// sweep). Migration alone, perfect and free, takes back no more than
// the background's share. Neither does serving the least attained
// service first within memory (strict CPU priority, no checkpoint): the
// long jobs keep their memory, and the short ones still wait for it in
// the queue. A queue that preempts long jobs out of memory does best,
// and still misses two thirds with its checkpoints free and instant
// (0.71); had every job asked the largest class, as the benchmark's jobs
// did before a sweep's indices could each ask their own --mem, it would
// just pass (0.65). At what a checkpoint and a restore cost here (about
// 0.5 CPU-seconds each for the sweep's mean job of 100 MiB: 11 ms a MiB,
// docs/benchmarks.md) every such queue misses both targets. The numbers
// are logged (go test -v): docs/benchmarks.md cites them.
func TestSweepTargetIsPastTheBound(t *testing.T) {
	jobs := sweepJobs(sweepFull)
	ideal := 0.0
	for _, j := range jobs {
		ideal += j.cpu
	}
	ideal /= capacitySum(sweepCaps())
	static, staticSpan := fluidSweep(jobs, fluidStatic, nil, 0, nil)
	pooled, pooledSpan := fluidSweep(jobs, fluidPooled, nil, 0, nil)
	local, localSpan := fluidSweep(jobs, fluidLocal, nil, 0, nil)
	t.Logf("least-loaded placement, never moved: %.0f (%.3f of static's), makespan %.2f × the ideal", local, local/static, localSpan/ideal)
	t.Logf("static: mean slowdown %.0f, makespan %.0f s (ideal %.0f s); pooled (perfect free migration): %.0f (%.3f of static's), %.0f s", static, staticSpan, ideal, pooled, pooled/static, pooledSpan)
	if r := pooled / static; r < 0.9 || r > 1.02 {
		t.Errorf("perfect free migration gives %.3f of static's mean slowdown; the docs say it takes back the background's share and no more (0.9 to 1.02)", r)
	}
	bestPrio := math.Inf(1)
	for _, pr := range [][]float64{{0.5}, {0.5, 1, 2, 4}, {0.25, 0.5, 1, 2, 4, 8}, {0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8}} {
		local, localSpan := fluidSweep(jobs, fluidLocal, nil, 0, pr)
		all, allSpan := fluidSweep(jobs, fluidPooled, nil, 0, pr)
		t.Logf("CPU by attained service at %v CPU-s, no checkpoint: %.3f of static's mean slowdown on each node (makespan %.2f × the ideal), %.3f pooled (%.2f)", pr, local/static, localSpan/ideal, all/static, allSpan/ideal)
		bestPrio = math.Min(bestPrio, math.Min(local, all)/static)
	}
	if bestPrio <= sweepTarget || bestPrio >= 1 {
		t.Errorf("CPU by attained service, without checkpoints, gives at best %.3f of static's mean slowdown; the docs say it helps (under 1) but stays above the target %.3f", bestPrio, sweepTarget)
	}
	queues := [][]float64{{0.2}, {0.3}, {0.4}, {0.5}, {0.7}, {1}, {2}, {0.5, 2}, {0.7, 1.4, 2.8}, {0.5, 1, 2, 4}, {0.5, 1, 1.5, 2, 3, 4, 6, 8, 12}}
	best := math.Inf(1)
	for _, qs := range queues {
		free, _ := fluidSweep(jobs, fluidPooled, qs, 0, nil)
		paid, paidSpan := fluidSweep(jobs, fluidPooled, qs, 0.5, nil)
		t.Logf("preempted at %v CPU-s: %.3f of static's mean slowdown with free checkpoints; %.3f, makespan %.2f × the ideal, with 0.5 CPU-s each", qs, free/static, paid/static, paidSpan/ideal)
		best = math.Min(best, free/static)
		if paid/static <= sweepTarget && paidSpan/ideal <= sweepMakespanTarget {
			t.Errorf("preempted at %v CPU-s with 0.5 CPU-s checkpoints: %.3f of static's mean slowdown, %.2f × the ideal: both targets met; the docs say no such queue meets them", qs, paid/static, paidSpan/ideal)
		}
	}
	if best <= sweepTarget || best > 0.75 {
		t.Errorf("the best queue with free checkpoints gives %.3f of static's mean slowdown; the docs say just over the target %.3f", best, sweepTarget)
	}
	// Every job asking the largest class: more wait, the short among
	// them behind the long, and free preemption has more to gain.
	largest := append([]sweepJob(nil), jobs...)
	for i := range largest {
		largest[i].mib = slices.Max(sweepClasses)
	}
	static256, _ := fluidSweep(largest, fluidStatic, nil, 0, nil)
	free256, _ := fluidSweep(largest, fluidPooled, []float64{0.5, 1, 2, 4}, 0, nil)
	t.Logf("every job asking %d MiB: static's mean slowdown %.0f; preempted at 0.5, 1, 2 and 4 CPU-s with free checkpoints %.3f of it", slices.Max(sweepClasses), static256, free256/static256)
	if r := free256 / static256; r > sweepTarget || r < 0.6 || static256 < static {
		t.Errorf("every job asking the largest class: free preemption gives %.3f of static's %.0f (each its class: %.0f); the docs say just under the target %.3f, from a larger static mean", r, static256, static, sweepTarget)
	}
}

// The target stays out of reach however much of the sweep memory holds
// at once, up to all of it: with every job submitted at once and in
// memory, serving the least attained service first is processor
// sharing, and what is left to gain is static's round-robin putting as
// many jobs on the 0.2-CPU node as on the 0.8. Least attained service
// pooled over the cluster, the best of the no-checkpoint schedules
// above, is logged for memory twice make demo's (82 jobs of the mean
// request at once) and 40 times (all 600).
func TestSweepTargetHoldsForAnyMemory(t *testing.T) {
	jobs := sweepJobs(sweepFull)
	mean := 0.0 // the mean request, MiB
	for _, j := range jobs {
		mean += float64(j.mib) / float64(len(jobs))
	}
	orig := append([]int(nil), sweepMemMB...)
	t.Cleanup(func() { copy(sweepMemMB, orig) })
	for _, times := range []int{2, 40} {
		for k := range sweepMemMB {
			sweepMemMB[k] = orig[k] * times
		}
		static, _ := fluidSweep(jobs, fluidStatic, nil, 0, nil)
		las, _ := fluidSweep(jobs, fluidPooled, nil, 0, []float64{0.5, 1, 2, 4})
		at := 0 // jobs of the mean request the nodes hold at once
		for _, mb := range sweepMemMB {
			at += int(float64(mb) / mean)
		}
		at = min(at, len(jobs))
		t.Logf("memory for %d jobs at once: pooled least attained service gives %.3f of static's mean slowdown (%.0f)", at, las/static, static)
		if r := las / static; r <= sweepTarget || r >= 1 {
			t.Errorf("memory for %d jobs at once: pooled least attained service gives %.3f of static's mean slowdown; the docs say it helps (under 1) but stays above the target %.3f", at, r, sweepTarget)
		}
	}
}
