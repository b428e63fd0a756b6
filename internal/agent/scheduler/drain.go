package scheduler

// Draining a node (roam node drain, resume, remove). The node itself
// keeps the state, in its job store (bbolt: it outlives a restart), and
// tells the cluster in its gossip metadata; its scheduler's rounds are
// then sched.Drain's, and no node places or moves a job there.

import (
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"roam/internal/agent/httpx"
	"roam/internal/agent/jobtable"
	"roam/internal/agent/members"
	"roam/internal/agent/peer"
	"roam/internal/agent/rounds"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/lockorder"
)

// DrainConfig is what a Drain is built from.
type DrainConfig struct {
	Node string // this node's id
	Log  *slog.Logger
	// Store keeps the state across restarts.
	Store   *job.Store
	Jobs    *jobtable.Table
	Members *members.Table
	Peers   *peer.Client
	Rounds  *rounds.Rounds
	// Event records a decision for `roam events` (Recorder).
	Event func(api.Event)
	// Advertise gossips this node's metadata, which says whether it
	// drains, again (gossip.Gossip.Advertise). A change of the state
	// calls it with the drain's lock held, so that the members hear the
	// changes in their order: its locks come after the drain's in the
	// agent's lock order.
	Advertise func()
	// Arriving is how many migrations are coming to this node.
	Arriving func() int
	// Leave stops the agent, which leaves the cluster (roam node remove).
	Leave func()
	// Rank is the drain's lock's place in the agent's lock order.
	Rank lockorder.Rank
}

// Drain is this node's drain state, with its copy in the job store and
// in the gossiped metadata.
type Drain struct {
	c  DrainConfig
	on atomic.Bool
	// mu orders the changes of the state with those of its copies.
	mu lockorder.Mutex
}

// NewDrain is the drain state of a node that does not drain, until
// Restore reads the kept one.
func NewDrain(c DrainConfig) *Drain {
	d := &Drain{c: c}
	d.mu.Init(c.Rank, "drain.mu")
	return d
}

// Restore takes the state the job store kept (at start), without
// gossiping it: memberlist asks for the metadata when it starts.
func (d *Drain) Restore() {
	d.mu.Lock()
	defer d.mu.Unlock()
	on, err := d.c.Store.Draining()
	if err != nil {
		d.c.Log.Warn("drain state not read", "err", err)
	}
	d.on.Store(on)
	if on {
		d.c.Log.Info("node is draining (roam node resume ends it)")
	}
}

// On says whether this node drains.
func (d *Drain) On() bool { return d.on.Load() }

// Of says whether node drains, as this node knows.
func (d *Drain) Of(node string) bool {
	if node == d.c.Node {
		return d.On()
	}
	p, _ := d.c.Members.Get(node)
	return p.Draining
}

// Ask asks node to drain, to resume, or (peer.DrainLeave) to leave the
// cluster once it runs no job. Only root may.
func (d *Drain) Ask(c httpx.Caller, node, state string) error {
	if c.UID != 0 {
		return errkind.New(peer.ErrPermission, "node %s: only root may drain, resume or remove a node", node)
	}
	if state != peer.DrainOn && state != peer.DrainOff && state != peer.DrainLeave {
		return errkind.New(peer.ErrBadRequest, "node state %q is not one of drain, resume, leave", state)
	}
	if _, ok := d.c.Members.Get(node); !ok {
		return errkind.New(peer.ErrNotFound, "no node %q in the cluster", node)
	}
	return d.c.Peers.Call(node, http.MethodPost, peer.Drain+"?state="+state, nil, nil)
}

// Set is the peer route (POST peer.Drain): this node drains, resumes or
// leaves.
func (d *Drain) Set(state string) error {
	switch state {
	case peer.DrainOn, peer.DrainOff:
	case peer.DrainLeave:
		return d.leave()
	default:
		return errkind.New(peer.ErrBadRequest, "node state %q is not one of drain, resume, leave", state)
	}
	on := state == peer.DrainOn
	d.mu.Lock() // the kept state and the flag change together
	defer d.mu.Unlock()
	if err := d.c.Store.PutDraining(on); err != nil {
		return err
	}
	if d.on.Swap(on) != on {
		d.c.Log.Info("drain", "draining", on)
		d.c.Event(api.Event{Kind: state, Why: "roam node " + state})
		d.c.Advertise()
		d.c.Rounds.Kick()
	}
	return nil
}

// leave has a draining node leave the cluster, once it runs no job, none
// arrives, and it is the home of none that runs.
func (d *Drain) leave() error {
	if !d.On() {
		return errkind.New(peer.ErrBadRequest, "node %s is not draining: drain it first (roam node drain)", d.c.Node)
	}
	// Draining, it takes no new job nor move; it leaves once none
	// runs or arrives here, and it is the home of none that runs.
	n, homed := d.c.Jobs.Busy()
	in := d.c.Arriving()
	switch {
	case n > 0:
		return errkind.New(peer.ErrBadRequest, "node %s still runs %d jobs: it leaves once it runs none", d.c.Node, n)
	case in > 0:
		return errkind.New(peer.ErrBadRequest, "node %s has %d migrations arriving: it leaves once they are over", d.c.Node, in)
	case homed > 0:
		return errkind.New(peer.ErrBadRequest, "node %s is the home of %d running jobs (their records and output are kept there): it leaves once they have ended", d.c.Node, homed)
	}
	// After the answer: the agent's stop waits for the servers' handlers.
	go func() {
		time.Sleep(100 * time.Millisecond)
		d.c.Log.Info("leaving the cluster (roam node remove)")
		d.c.Leave()
	}()
	return nil
}
