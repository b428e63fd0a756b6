package sched

// A round's inputs: how a node's load vector, its membership and its
// probed jobs become the Snapshot its policy decides on. The agent
// (members.Table.Peers, rounds.Rounds.Complete) and the simulator
// (internal/sim) both build their snapshots here, so that a decision's
// recorded inputs replay through the one builder.

import (
	"sort"
	"strconv"
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

// Peers is a round's peers: the entries of load vector v of the nodes
// membership has alive, self left out, in node order (IDLess). A member
// not in the vector is not a peer: nothing is known of its load.
func Peers(self string, v *load.Vector, info func(id string) PeerInfo) []Node {
	return AppendPeers(make([]Node, 0, v.Len()), self, v, info)
}

// AppendPeers is Peers appended to dst, for a caller that reuses one
// slice from round to round (the simulator: Decide copies what it keeps).
func AppendPeers(dst []Node, self string, v *load.Vector, info func(id string) PeerInfo) []Node {
	out := dst
	for i := range v.Len() {
		e := v.At(i)
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
	sortByID(out[len(dst):])
	return out
}

// sortByID sorts nodes by IDLess. A load vector's few are sorted by
// insertion, as sort.Sort sorts up to 12, on their keys and positions on
// the stack, and then moved once each: a simulator sorts every node's
// peers every second, and swapping whole Nodes was a third of the sort.
func sortByID(nodes []Node) {
	if len(nodes) > 12 {
		sort.Sort(byID{nodes, idKeys(nodes, nil)})
		return
	}
	var buf [12]idKey
	var at [12]uint8 // at[k]: the position now of the k-th in order
	b := byID{nodes, idKeys(nodes, buf[:0])}
	moved := false
	for i := range nodes {
		at[i] = uint8(i)
		for j := i; j > 0 && b.less(int(at[j]), int(at[j-1])); j-- {
			at[j], at[j-1] = at[j-1], at[j]
			moved = true
		}
	}
	if !moved {
		return
	}
	var was [12]Node
	copy(was[:], nodes)
	for k := range nodes {
		nodes[k] = was[at[k]]
	}
}

// byID sorts nodes by IDLess with each id parsed once, not at every
// comparison: a round's peers are sorted at every round of every node
// (a tenth of the simulator's time at 10,000 nodes, before).
type byID struct {
	nodes []Node
	keys  []idKey
}

type idKey struct {
	n  int
	ok bool // the id is a number: IDLess compares the numbers
}

// idKeys appends the nodes' keys to keys.
func idKeys(nodes []Node, keys []idKey) []idKey {
	for _, x := range nodes {
		n, err := strconv.Atoi(x.ID)
		keys = append(keys, idKey{n, err == nil})
	}
	return keys
}

func (b byID) Len() int { return len(b.nodes) }
func (b byID) Swap(i, j int) {
	b.nodes[i], b.nodes[j] = b.nodes[j], b.nodes[i]
	b.keys[i], b.keys[j] = b.keys[j], b.keys[i]
}

// Less is IDLess on the parsed ids.
func (b byID) Less(i, j int) bool { return b.less(i, j) }

func (b byID) less(i, j int) bool {
	if b.keys[i].ok && b.keys[j].ok {
		return b.keys[i].n < b.keys[j].n
	}
	return b.nodes[i].ID < b.nodes[j].ID
}

// NodeLoadOf is what placement knows of a member other than the node
// itself: its capacity and membership's view, and the load, memory for
// jobs and memory held of its load-vector entry e when the vector holds
// one (known); else its load is Unknown (guessed by Place). The agent's
// members table and the simulator build placement's nodes with it.
func NodeLoadOf(id string, capacity float64, info PeerInfo, e load.Entry, known bool) NodeLoad {
	nl := NodeLoad{ID: id, Capacity: capacity, Draining: info.Draining, CPU: info.CPU}
	if known {
		nl.Load, nl.MemJobsMB, nl.MemHeldMB = e.Load, e.MemJobsMB, e.MemHeldMB
	} else {
		nl.Unknown = true
	}
	return nl
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
