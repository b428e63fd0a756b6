package sched

import (
	"fmt"
	"slices"
	"sort"
	"time"
)

// Draining a node (roam node drain): every job a drain may move leaves
// it, each to the node with room where its share of a CPU is largest,
// whatever the gain, and no job is placed or moved there until it is
// resumed. Like the policies, this is a pure function of a snapshot.

// ProblemDrain is the kind of a drain's moves: the destination takes one
// when it has room (KeepFreeMB free after it) and is not draining itself.
const ProblemDrain ProblemKind = "drain"

// DrainKeepFreeMB is what a drain's destination must keep free after
// taking a job.
const DrainKeepFreeMB = 64

// Drain is a draining node's round: a move for each of its jobs that a
// drain may move (not pinned with roam run --pin, not found unmovable; a
// job placed by hand moves), the largest first, each to the peer with
// room that would have the lowest load with it, counting the moves
// before it. A job no peer has room for stays, and is tried again next
// round. Draining peers are no destinations.
func Drain(s Snapshot) []Move {
	s = Effective(s)
	s.Peers = slices.DeleteFunc(s.Peers, func(p Node) bool { return p.Draining || p.Capacity <= 0 })
	jobs := slices.Clone(s.Jobs)
	sort.SliceStable(jobs, func(i, j int) bool {
		if jobs[i].RSSMB != jobs[j].RSSMB {
			return jobs[i].RSSMB > jobs[j].RSSMB
		}
		return jobs[i].ID < jobs[j].ID
	})
	var out []Move
	for _, j := range jobs {
		if j.Held != "" && !j.Manual {
			continue
		}
		mv := Move{Job: j.ID, From: s.Self.ID, Kind: ProblemDrain, RSSMB: j.RSSMB, Runnable: j.Runnable, MemReqMB: j.MemReqMB, CPU: j.CPU, Within: j.Within,
			SrcLoad: s.Self.Load, KeepFreeMB: DrainKeepFreeMB, At: s.Now, By: "drain"}
		best := -1
		var bestLoad float64
		for i, p := range s.Peers {
			if fits(mv, p) != nil {
				continue
			}
			if l := afterLoad(mv, p); best < 0 || l < bestLoad-1e-9 || (l < bestLoad+1e-9 && IDLess(p.ID, s.Peers[best].ID)) {
				best, bestLoad = i, l
			}
		}
		if best < 0 {
			continue
		}
		mv.To = s.Peers[best].ID
		mv.Why = fmt.Sprintf("node %s is draining; moved job %s (%.0f MiB, age %s) to node %s, load %.2f with it",
			s.Self.ID, j.ID, j.RSSMB, s.Now.Sub(j.Started).Round(time.Second), mv.To, bestLoad)
		out = append(out, mv)
		s = apply(s, mv)
	}
	return out
}
