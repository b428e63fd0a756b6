package members

// The home's queue reads the cluster here: a round of it (queue.Decide)
// runs on the live members as this table sees them, with the policy's
// placement, its round-robin cursor and its random source, which the
// placement of new runs shares.

import (
	"slices"
	"time"

	"roam/internal/load"
	"roam/internal/queue"
	"roam/internal/slurm"
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
// with when each entry was received). Whether jobs wait for room after
// it goes out with this node's load entries (load.Entry.Waiting): the
// nodes whose jobs' room frees tell it at once (load.RoomNews).
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
	t.rr, t.waiting = d.RR, d.ForRoom
	return d
}

// roomTargets is whom this node's entry goes to now, out of turn, for
// the homes' queues: the peers whose queues wait for room, when the
// memory its jobs' requests hold changed (load.RoomNews), and those whose
// queues began to wait (newlyWaiting: a home that starts to wait knows
// every node's room as it is, not as its last entry there said, maybe
// seconds ago); and every live peer once this node's own queue starts
// waiting for room, at most once an interval, so that each tells it of
// its room from then on rather than after its entry has reached it by
// chance. mu held.
func (t *Table) roomTargets(now time.Time, live []string) []string {
	out := load.RoomNews(now, t.dis.Vector.Entries(), t.selfHeld, &t.heldNews, &t.roomNewsAt, t.dis.Interval)
	out, t.answer = append(out, t.answer...), nil
	switch {
	case !t.waiting:
		t.told = false
	case !t.told && !now.Before(t.toldAt.Add(t.dis.Interval)):
		t.told, t.toldAt = true, now
		for _, id := range live {
			if id != t.self {
				out = append(out, id)
			}
		}
	}
	return out
}

// newlyWaiting notes a live peer whose entry e says its queue waits for
// room where its entry before (prev, had) did not: this node's entry goes
// to it at the next probe. A peer's queue starts to wait at most as
// often as it tells every peer, once an interval. mu held.
func (t *Table) newlyWaiting(live bool, prev load.Entry, had bool, e load.Entry) {
	if live && e.Waiting && !(had && prev.Waiting) && !slices.Contains(t.answer, e.Node) {
		t.answer = append(t.answer, e.Node)
	}
}

// SlurmNodes are the members, live or not, whose Slurm names job's node
// list has, each with the CPUs job holds of it (0: unknown); never nil.
func (t *Table) SlurmNodes(job slurm.Job) map[string]int {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]int{}
	for id, p := range t.known {
		if p.Slurm != "" && job.Has(p.Slurm) {
			out[id] = job.Alloc[p.Slurm].CPUs
		}
	}
	return out
}
