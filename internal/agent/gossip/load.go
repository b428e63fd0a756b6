package gossip

// The load loop: the node's load probed several times per interval and
// sent to the targets of package load's dissemination, and the load
// messages of its peers taken.

import (
	"errors"
	"time"

	"github.com/hashicorp/memberlist"

	"roam/internal/load"
	"roam/internal/resources"
)

// loadLoop samples the node's CPU load several times per interval, and
// sends its load to the targets the dissemination protocol picks.
func (g *Gossip) loadLoop() {
	defer g.c.Group.Done()
	t := time.NewTicker(g.c.Interval / probesPerInterval)
	defer t.Stop()
	for {
		select {
		case <-g.c.Stop:
			return
		case now := <-t.C:
			g.step(now)
			g.metaCheck()
		case <-g.kick:
			g.step(time.Now())
		}
	}
}

// Kick has the load loop probe now, out of turn: a job here ended or
// left. A node that goes idle tells the busier nodes at once
// (load.Disseminator.News), rather than at the next probe, up to a
// quarter interval later, while their jobs wait for a CPU.
func (g *Gossip) Kick() {
	select {
	case g.kick <- struct{}{}:
	default:
	}
}

// step is one timer tick: probe, then maybe send.
func (g *Gossip) step(now time.Time) {
	runnable := g.c.Sched.Runnable()
	mem := g.c.Prober.MemFreeMB()
	pending := g.c.Sched.Pending(now)
	held := float64(g.c.Jobs.MemHeld("")) / (1 << 20)
	targets, msg := g.c.Members.Probe(now, runnable, mem, g.c.Jobs.Count(), held, pending)
	if len(targets) == 0 {
		return
	}
	byName := map[string]*memberlist.Node{}
	for _, n := range g.ml.Members() {
		byName[n.Name] = n
	}
	for _, id := range targets {
		n := byName[id]
		if n == nil {
			continue
		}
		if err := g.ml.SendBestEffort(n, msg); err != nil {
			g.c.Log.Debug("send load", "to", id, "err", err)
			continue
		}
		g.c.Counters.Sent.Add(1)
		g.c.Counters.BytesSent.Add(int64(len(msg)))
	}
}

// NotifyMsg takes a load message from memberlist: already decrypted and
// authenticated, but still untrusted. memberlist may reuse b after the
// call, and it is not kept.
func (g *Gossip) NotifyMsg(b []byte) {
	e, err := load.DecodeMessage(b)
	switch {
	case errors.Is(err, load.ErrOversized):
		g.c.Counters.Oversized.Add(1)
		return
	case err != nil:
		g.c.Counters.Malformed.Add(1)
		return
	}
	g.c.Counters.Received.Add(1)
	r := g.c.Members.Receive(time.Now(), e)
	kept, eases := r.Kept, r.Eased
	if r.Live && !eases {
		// Or a node that refused this node's move has room now, which
		// the vector's last entry may have shown all along.
		eases = g.c.Rounds.Eased(e.Node, e.Load, e.Capacity, r.SelfLoad)
	}
	if kept {
		g.c.Counters.Kept.Add(1)
	} else {
		g.c.Counters.Discarded.Add(1)
	}
	if r.Live && e.MemJobsMB-e.MemHeldMB >= float64(resources.MinMemBytes>>20) && g.c.Jobs.ForRoom() {
		// Room on a node, and jobs of this home wait for some: the queue
		// looks at once (each home that waits hears it alike).
		g.c.Jobs.KickRelease()
	}
	if eases {
		// A peer could take one of this node's jobs now: judge at once
		// rather than at the period (a passive policy's round).
		g.c.Rounds.Kick()
	}
}
