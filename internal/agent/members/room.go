package members

// The home's queue reads the cluster here: a round of it (queue.Decide)
// runs on the live members as this table sees them, with the policy's
// placement, its round-robin cursor and its random source, which the
// placement of new runs shares.

import (
	"time"

	"roam/internal/queue"
)

// OldestHeard is when the oldest load entry of a live peer was received
// (zero when there is none): a job of this home started before it is
// counted in every entry.
func (t *Table) OldestHeard() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	var oldest time.Time
	for id, p := range t.known {
		if e, ok := t.dis.Vector.Get(id); ok && p.Alive && id != t.self && (oldest.IsZero() || e.Received.Before(oldest)) {
			oldest = e.Received
		}
	}
	return oldest
}

// Release runs a round of the home's queue on in, its nodes the live
// members (this node's own as probed, its drain state selfDraining and
// its memory requests selfHeldMB now; the others from the load vector,
// with when each entry was received).
func (t *Table) Release(in queue.Input, selfDraining bool, selfHeldMB float64) queue.Decision {
	t.mu.Lock()
	defer t.mu.Unlock()
	in.Nodes, in.Heard = nil, map[string]time.Time{}
	for id, p := range t.known {
		if !p.Alive {
			continue
		}
		in.Nodes = append(in.Nodes, t.nodeLoad(id, p, selfDraining, selfHeldMB))
		if e, ok := t.dis.Vector.Get(id); ok && id != t.self {
			in.Heard[id] = e.Received
		}
	}
	in.Self, in.Placement, in.RR = t.self, t.placement, t.rr
	d := queue.Decide(in, t.rng)
	t.rr = d.RR
	return d
}
