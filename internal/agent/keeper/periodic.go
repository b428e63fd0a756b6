package keeper

import (
	"hash/fnv"
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

// StoreFor picks the node that keeps a job's periodic checkpoint:
// its home when the job runs elsewhere, else one of the other live nodes,
// the same for a job each time while it can (by a hash of the job id), so
// the jobs of a home spread over the others. "" when there is none.
func StoreFor(id, running, home string, live []string) string {
	if home != running && slices.Contains(live, home) {
		return home
	}
	var others []string
	for _, n := range live {
		if n != running {
			others = append(others, n)
		}
	}
	if len(others) == 0 {
		return ""
	}
	sort.Strings(others)
	h := fnv.New32a()
	h.Write([]byte(id))
	return others[h.Sum32()%uint32(len(others))]
}
