package members

// What a recorded round (package decisions) needs of the table: the raw
// inputs of a round's peers, and a decision's random draws.

import (
	"math/rand"

	"roam/internal/load"
	"roam/internal/sched"
)

// PeerInputs is Peers with what it was built from, under one hold of
// the lock: the load vector's entries, oldest first, and membership's
// view of each entry's node.
func (t *Table) PeerInputs() (peers []sched.Node, vector []load.Entry, info map[string]sched.PeerInfo) {
	t.mu.Lock()
	defer t.mu.Unlock()
	info = map[string]sched.PeerInfo{}
	peers = sched.Peers(t.self, t.dis.Vector, func(id string) sched.PeerInfo {
		pi := t.peerInfo(id)
		info[id] = pi
		return pi
	})
	return peers, t.dis.Vector.Entries(), info
}

// DecideDrawn is Decide with its random draws kept: they come from a
// source seeded from the table's.
func (t *Table) DecideDrawn(pol *sched.Scheduler, snap sched.Snapshot) ([]sched.Move, []uint64) {
	t.mu.Lock()
	tap := sched.NewTap(t.rng.Int63())
	t.mu.Unlock()
	moves := pol.Decide(snap, rand.New(tap))
	return moves, tap.Draws
}
