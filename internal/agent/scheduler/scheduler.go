// Package scheduler is the agent's scheduling: the I/O of the rounds
// (what a round measures of the node and its jobs, and each move it
// decides, admitted by its destination, then migrated), the
// destination's admission of a move, the policy that runs (the config's,
// one loaded with `roam policy load`, or one taken from the cluster's
// gossip), the decisions kept for `roam events`, and the node's drain.
//
// What a round decides is package sched's, and the rounds' state
// (policy, ledger, samples, events) package rounds'. The scheduler reads
// /proc with no lock held: memberlist's callbacks, which must not block,
// take the rounds' lock. It must not import internal/agent: a migration
// is the agent's, given as a func of its Config.
package scheduler

import (
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"roam/internal/agent/decisions"
	"roam/internal/agent/jobtable"
	"roam/internal/agent/members"
	"roam/internal/agent/peer"
	"roam/internal/agent/rounds"
	"roam/internal/api"
	"roam/internal/cpufeat"
	"roam/internal/job"
	"roam/internal/sched"
)

// Prober measures the node (the agent's Parts.Prober).
type Prober interface {
	// Runnable is how many threads are runnable on the node now, the
	// processes in skip (the jobs' roam-init, pid to start time) left out.
	Runnable(skip map[int]uint64) int
	// MemFreeMB is the memory free to the node.
	MemFreeMB() float64
}

// Config is what a Scheduler is built from: its node, the owners it
// calls, and the migration it starts.
type Config struct {
	Node     string  // this node's id
	Capacity float64 // this node's capacity, in cores
	// JobMemMB is the memory this node gives its jobs' requests, in MiB
	// (0: not counted): a move here needs room in it (sched.MemFits).
	JobMemMB float64
	Log      *slog.Logger

	Rounds  *rounds.Rounds
	Members *members.Table
	Jobs    *jobtable.Table
	Peers   *peer.Client
	Drain   *Drain
	// Store keeps a loaded policy across restarts; nil keeps none.
	Store  *job.Store
	Procs  job.Processes
	Prober Prober

	// Event records a decision for `roam events` (Recorder).
	Event func(api.Event)
	// Migrate migrates a move's job out of this node to the move's
	// destination, and says how it went.
	Migrate func(sched.Move) (api.Migration, error)

	// Stop ends the rounds' loop; Group holds it and the goroutines the
	// scheduler leaves running (a withdrawal, a round's moves).
	Stop  <-chan struct{}
	Group *sync.WaitGroup
	// StateDir and RecordBytes are record_decisions_bytes's: the rounds
	// are recorded in StateDir up to RecordBytes (package decisions); 0:
	// not at all.
	StateDir    string
	RecordBytes int64
}

// Scheduler is the node's side of the scheduling.
type Scheduler struct {
	c Config
	// least is the least CPU time a runnable job here has had, as the
	// last round measured it (sched.Node.Least), as math.Float64bits.
	least atomic.Uint64
	rec   *decisions.Recorder // nil: rounds are not recorded
}

// New is the scheduler of c; it starts nothing (Loop).
func New(c Config) *Scheduler {
	return &Scheduler{c: c, rec: decisions.New(c.StateDir, c.RecordBytes, c.Log)}
}

// Loop runs the rounds until Config.Stop closes; Config.Group holds it.
func (s *Scheduler) Loop() {
	rd := rounds.Round{Snapshot: s.Snapshot, Decide: s.c.Members.Decide, Move: s.Move}
	if s.rec != nil {
		// Only the loop's goroutine uses kept: a round takes its
		// snapshot and decides one after the other (rounds.Run).
		var kept sched.Recorded
		rd.Snapshot = func() sched.Snapshot { kept = sched.Recorded{}; return s.snapshot(&kept) }
		rd.Decide = func(pol *sched.Scheduler, snap sched.Snapshot) []sched.Move { return s.decideKept(pol, snap, &kept) }
	}
	s.c.Rounds.Loop(s.c.Stop, s.c.Group, rd)
}

// Least is the least CPU time a runnable job here had at the last round.
func (s *Scheduler) Least() float64 { return math.Float64frombits(s.least.Load()) }

// SetLeast takes a round's measure of the least CPU time of the jobs here
// (Snapshot sets it; a harness without jobs to measure, too).
func (s *Scheduler) SetLeast(cpu float64) { s.least.Store(math.Float64bits(cpu)) }

// Pending is the load of the moves this node admitted and has not yet
// received (sched.Ledger.Reserved), and the least CPU time of its jobs
// (sched.Node.Least) with theirs counted in. The load it sends counts
// them, as its answers to moves do: a peer that a refusal told of them
// would otherwise forget them at this node's next entry, measured before
// the jobs arrive, and choose this node again.
func (s *Scheduler) Pending(now time.Time) sched.Node {
	return s.c.Rounds.Reserved(sched.Node{Capacity: s.c.Capacity, Least: s.Least()}, now)
}

// self is this node as a round or an admission judges it: its load
// (runnable threads), free memory, drain state, least CPU time, the
// memory requests of the jobs it holds (the admitted moves' are the
// ledger's to add), and whether its queue waits for room.
func (s *Scheduler) self(runnable int) sched.Node {
	return sched.Node{ID: s.c.Node, Capacity: s.c.Capacity, Load: float64(runnable) / s.c.Capacity, MemFreeMB: s.c.Prober.MemFreeMB(),
		Draining: s.c.Drain.On(), Least: s.Least(), MemJobsMB: s.c.JobMemMB, MemHeldMB: float64(s.c.Jobs.MemHeld("")) / (1 << 20),
		Waiting: s.c.Jobs.ForRoom(), CPU: s.ownCPU()}
}

// ownCPU is what this node's CPU offers, as its metadata says: a move
// comes here only when it has every feature of the job's (sched.Admit).
func (s *Scheduler) ownCPU() cpufeat.Set {
	m, _ := s.c.Members.Get(s.c.Node)
	return m.Host.CPU
}

// Runnable is how many threads are runnable on this node now, its jobs'
// roam-init processes left out: they only wait for their children, but
// one just restored or started is runnable until it gets a CPU, which a
// throttled node gives it only at its next period (probe.Node.Runnable).
func (s *Scheduler) Runnable() int { return s.c.Prober.Runnable(s.c.Jobs.Inits()) }
