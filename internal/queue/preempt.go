package queue

// Preemption: the queue's second level. Memory admits a few of a
// sweep's jobs at once, so a job's slowdown is mostly its wait in the
// queue, and first come first served makes every short job wait behind
// the long ones started before it. When lengths are unknown and
// heavy-tailed, serving first the job that has had the least CPU is
// near-optimal for mean slowdown; a two-level feedback queue is its
// coarse form, and fits a queue whose jobs cannot share memory: a job
// that has had its quantum (Policy.PreemptAfter, CPU time on every node
// it ran on) while fresh jobs of its own group wait for room is
// checkpointed to disk, its room freed, and starts again from its
// checkpoint, on any node with room, after every fresh job of its
// group (Decide orders them so). A fluid model of roam bench sweep
// gives 0.62 of static placement's mean slowdown at a quantum of half
// a CPU-second, against 0.93 for migration alone.
//
// What Preempt never does: preempt to let nothing in (only while fresh
// jobs of the same group, so of the same user, wait for room, and no
// more jobs than wait); preempt one user's job to let another's in (the
// room freed goes to whom the queue's fair order gives it, which is
// fairness as the queue keeps it); preempt a job twice (two levels: the
// second level is first come first served, each job's checkpoint is
// taken at most once); preempt a job that cannot be checkpointed
// (Run.Held: pinned, found unmovable, a checkpoint of it failed).

import (
	"sort"
	"time"
)

// Run is a job of this home that runs, as Preempt reads it.
type Run struct {
	ID, Node string
	// Key is its group's (Group.Key).
	Key string
	// CPU is the CPU time it has had, on every node it ran on (roam
	// ps's).
	CPU time.Duration
	// MemMB is its memory request, the room a preemption frees.
	MemMB float64
	// Preempted: it was preempted once already, and runs again from its
	// checkpoint.
	Preempted bool
	// Preempting: its preemption is under way; its room comes free soon.
	Preempting bool
	// Held says why it may not be checkpointed ("": it may): pinned
	// (run --pin), a file or socket CRIU cannot take, a checkpoint of it
	// that failed.
	Held string
}

// PreemptInput is what Preempt reads.
type PreemptInput struct {
	// After is the quantum: the CPU time a job has before it may be
	// preempted (Policy.PreemptAfter; 0: never).
	After time.Duration
	// Short is the round's Decision.Short: by group, its fresh jobs left
	// waiting for room.
	Short map[string]int
	// NeedMB is the round's Decision.NeedMB: by group, the memory
	// request of its job that waits first.
	NeedMB map[string]float64
	// Runs are the home's running jobs.
	Runs []Run
	// RoomMB is the room for jobs' memory requests of each node that
	// takes starts, as the round saw it (sched.NodeLoad's MemJobsMB less
	// its MemHeldMB); a node not in it (draining, not heard, refusing)
	// takes no start, so the room freed there lets nothing in.
	RoomMB map[string]float64
}

// Preemption is one job to preempt.
type Preemption struct {
	ID, Node, Key string
	CPU           time.Duration
}

// Preempt says which running jobs to preempt: for each group with fresh
// jobs waiting for room, up to as many of its jobs (less those whose
// preemption is under way) as wait, each with at least After of CPU,
// never preempted before, not held, on a node where its room freed lets
// one of them in; the jobs that have had the most CPU first (under
// heavy-tailed lengths, the likeliest to run longest yet). Ties go to
// the lower id, so that a round is the same from the same input.
func Preempt(in PreemptInput) []Preemption {
	if in.After <= 0 {
		return nil
	}
	byKey := map[string][]Run{}
	under := map[string]int{}
	for _, r := range in.Runs {
		switch {
		case in.Short[r.Key] == 0:
		case r.Preempting:
			under[r.Key]++
		case r.Preempted || r.Held != "" || r.CPU < in.After:
		case !frees(in, r):
		default:
			byKey[r.Key] = append(byKey[r.Key], r)
		}
	}
	var out []Preemption
	for _, key := range sortedKeys(byKey) {
		rs := byKey[key]
		sort.Slice(rs, func(a, b int) bool {
			if rs[a].CPU != rs[b].CPU {
				return rs[a].CPU > rs[b].CPU
			}
			return rs[a].ID < rs[b].ID
		})
		n := min(in.Short[key]-under[key], len(rs))
		for _, r := range rs[:max(n, 0)] {
			out = append(out, Preemption{ID: r.ID, Node: r.Node, Key: key, CPU: r.CPU})
		}
	}
	return out
}

// frees says whether r's room, freed, lets one job of its group in on
// its node: the node takes starts, and its room with r's added fits the
// group's request.
func frees(in PreemptInput, r Run) bool {
	room, ok := in.RoomMB[r.Node]
	return ok && room+r.MemMB+1e-9 >= in.NeedMB[r.Key]
}

// sortedKeys is m's keys in order.
func sortedKeys(m map[string][]Run) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
