package sched

// A round's inputs: how a node's load vector, its membership and its
// probed jobs become the Snapshot its policy decides on. The agent
// (members.Table.Peers, rounds.Rounds.Complete) and the simulator
// (internal/sim) both build their snapshots here, so that a decision's
// recorded inputs replay through the one builder.

import (
	"iter"
	"sort"
	"time"

	"roam/internal/cpufeat"
	"roam/internal/load"
)

// PeerInfo is what membership says of a node besides its load entry.
type PeerInfo struct {
	Alive    bool
	Draining bool        // roam node drain, from its metadata
	CPU      cpufeat.Set // its CPU's features, from its metadata
}

// Peers is a round's peers: the load vector's entries of the nodes
// membership has alive, self left out, in node order (IDLess). A member
// not in the vector is not a peer: nothing is known of its load.
func Peers(self string, entries iter.Seq[load.Entry], info func(id string) PeerInfo) []Node {
	var out []Node
	for e := range entries {
		if e.Node == self {
			continue
		}
		p := info(e.Node)
		if !p.Alive {
			continue
		}
		out = append(out, Node{ID: e.Node, Capacity: e.Capacity, Load: e.Load, MemFreeMB: e.MemFreeMB, Received: e.Received, Draining: p.Draining,
			Least: e.Least, MemJobsMB: e.MemJobsMB, MemHeldMB: e.MemHeldMB, Waiting: e.Waiting, CPU: p.CPU})
	}
	sort.Slice(out, func(i, j int) bool { return IDLess(out[i].ID, out[j].ID) })
	return out
}

// Probed is a job as a node's probes saw it for a round: what the
// policies judge, and its runnable threads and system calls so far.
type Probed struct {
	Job      Job
	Runnable int
	Syscalls uint64
}

// Sample is a job's system-call count at a round, from which the next
// round reckons its rate.
type Sample struct {
	At       time.Time
	Syscalls uint64
}

// Complete fills in a round's snapshot s, whose Self and Peers the
// caller measured, with the probed jobs (here: the ids of every job
// running on the node, probed or not): each job's system calls per
// second since prev, the samples of the last round, and the ledger's
// heard loads, failures and recent moves. It returns the least CPU time
// a runnable job here has had (Node.Least) and the samples for the next
// round; with prev nil it keeps none (the simulator's jobs make no
// system calls) and next is nil.
func (l *Ledger) Complete(s *Snapshot, probed []Probed, here []string, prev map[string]Sample) (least float64, next map[string]Sample) {
	l.ApplyHeard(s.Peers)
	if prev != nil {
		next = make(map[string]Sample, len(probed))
	}
	for _, p := range probed {
		j := p.Job
		if p.Runnable > 0 && (least == 0 || j.Attained < least) {
			least = j.Attained
		}
		if prev, ok := prev[j.ID]; ok && s.Now.After(prev.At) && p.Syscalls >= prev.Syscalls {
			j.SyscallsPerSec = float64(p.Syscalls-prev.Syscalls) / s.Now.Sub(prev.At).Seconds()
		}
		if next != nil {
			next[j.ID] = Sample{s.Now, p.Syscalls}
		}
		s.Jobs = append(s.Jobs, j)
	}
	l.ApplyFailures(s.Jobs, here)
	s.Recent = l.Recent(s.Now)
	return least, next
}
