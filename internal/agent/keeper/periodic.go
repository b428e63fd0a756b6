package keeper

import (
	"slices"
	"sort"
	"time"
)

// Periodic checkpoints (roam run --checkpoint-every): when a job's is due,
// and which node keeps it.

// Due says whether a job checkpointed every `every` is due at
// now, and how late: counted from its last checkpoint here, or from when
// it started or came here (a checkpoint is not taken at once on arrival:
// the one it left is as new).
func Due(every time.Duration, last, arrived, now time.Time) (time.Duration, bool) {
	if every <= 0 {
		return 0, false
	}
	from := last
	if from.Before(arrived) {
		from = arrived
	}
	late := now.Sub(from) - every
	return late, late >= 0
}

// DueJob is a job whose periodic checkpoint is due: whose, and how late.
type DueJob struct {
	ID   string
	UID  uint32
	Late time.Duration
}

// Order is the order in which a node takes its due checkpoints, one at a
// time: the users in turn, each one's latest first, and each turn's jobs
// latest first (ties by id). Latest first alone let one user's hundred
// jobs, due together, hold every other user's checkpoint back until the
// last of them was taken.
func Order(ds []DueJob) []string {
	ds = slices.Clone(ds)
	sort.Slice(ds, func(a, b int) bool {
		if ds[a].Late != ds[b].Late {
			return ds[a].Late > ds[b].Late
		}
		return ds[a].ID < ds[b].ID
	})
	turn := make([]int, len(ds))
	taken := map[uint32]int{}
	for i, d := range ds {
		turn[i] = taken[d.UID]
		taken[d.UID]++
	}
	order := make([]int, len(ds))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return turn[order[a]] < turn[order[b]] })
	out := make([]string, len(ds))
	for i, k := range order {
		out[i] = ds[k].ID
	}
	return out
}

// StoreFor picks the node that keeps a job's periodic checkpoint: its
// home, while the home is live, wherever the job runs; "" while it is
// not (none is taken then: only the home restarts a job, and what it
// keeps stays). The home is the one store its restart always reaches and
// a job's cut-off node never holds: kept on another node, the checkpoint
// could be where the job moved next, and a cut of that node then took
// both the job (its fence's kill) and what would restart it (the chaos
// run lost a job so).
func StoreFor(id, running, home string, live []string) string {
	if slices.Contains(live, home) {
		return home
	}
	return ""
}
