package agent

import (
	"net/http"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/errkind"
)

// Draining a node (roam node drain, resume, remove). The node itself
// keeps the state, in its job table (so it outlives a restart), and
// tells the cluster in its gossip metadata; its scheduler's rounds are
// then sched.Drain's, and no node places or moves a job there.

// The states a drain request may ask for.
const (
	drainOn    = "drain"
	drainOff   = "resume"
	drainLeave = "leave"
)

// loadDrain takes the state the job table kept at start.
func (a *Agent) loadDrain() {
	on, err := a.store.Draining()
	if err != nil {
		a.log.Warn("drain state not read", "err", err)
	}
	if on {
		a.draining.Store(true)
		a.log.Info("node is draining (roam node resume ends it)")
	}
}

// DrainNode asks node to drain, to resume, or (drainLeave) to leave the
// cluster once it runs no job. Only root may.
func (a *Agent) DrainNode(c Caller, node, state string) error {
	if c.UID != 0 {
		return errkind.New(peer.ErrPermission, "node %s: only root may drain, resume or remove a node", node)
	}
	if state != drainOn && state != drainOff && state != drainLeave {
		return errkind.New(peer.ErrBadRequest, "node state %q is not one of drain, resume, leave", state)
	}
	if _, ok := a.members.Get(node); !ok {
		return errkind.New(peer.ErrNotFound, "no node %q in the cluster", node)
	}
	return a.peers.Call(node, http.MethodPost, peer.Drain+"?state="+state, nil, nil)
}

// setDrain is the peer route: this node drains, resumes or leaves.
func (a *Agent) setDrain(state string) error {
	switch state {
	case drainOn, drainOff:
	case drainLeave:
		if !a.draining.Load() {
			return errkind.New(peer.ErrBadRequest, "node %s is not draining: drain it first (roam node drain)", a.cfg.NodeID)
		}
		// Draining, it takes no new job nor move; it leaves once none
		// runs or arrives here, and it is the home of none that runs.
		n, homed := a.jobs.Busy()
		in := len(a.migr.Arrivals())
		switch {
		case n > 0:
			return errkind.New(peer.ErrBadRequest, "node %s still runs %d jobs: it leaves once it runs none", a.cfg.NodeID, n)
		case in > 0:
			return errkind.New(peer.ErrBadRequest, "node %s has %d migrations arriving: it leaves once they are over", a.cfg.NodeID, in)
		case homed > 0:
			return errkind.New(peer.ErrBadRequest, "node %s is the home of %d running jobs (their records and output are kept there): it leaves once they have ended", a.cfg.NodeID, homed)
		}
		// After the answer: Close waits for the servers' handlers.
		go func() {
			time.Sleep(100 * time.Millisecond)
			a.log.Info("leaving the cluster (roam node remove)")
			a.Close()
		}()
		return nil
	default:
		return errkind.New(peer.ErrBadRequest, "node state %q is not one of drain, resume, leave", state)
	}
	on := state == drainOn
	a.drainMu.Lock() // the kept state and the flag change together
	defer a.drainMu.Unlock()
	if err := a.store.PutDraining(on); err != nil {
		return err
	}
	if a.draining.Swap(on) != on {
		a.log.Info("drain", "draining", on)
		a.event(api.Event{Kind: state, Why: "roam node " + state})
		if a.ml != nil {
			a.metaMu.Lock()
			a.updateNode()
			a.metaMu.Unlock()
		}
		a.rounds.Kick()
	}
	return nil
}

// isDraining says whether node drains, as this node knows.
func (a *Agent) isDraining(node string) bool {
	if node == a.cfg.NodeID {
		return a.draining.Load()
	}
	p, _ := a.members.Get(node)
	return p.Draining
}
