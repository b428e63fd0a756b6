// Package rounds is the scheduling rounds' owner, one type with one lock:
// the policy that runs (and its version, for the cluster's gossip), the
// rounds' ledger (package sched: admissions, heard loads, recent and
// failed moves, the pacing), the jobs' last samples, and the loop that
// runs a round when the ledger says. What a round measures and how a move
// is carried out are the agent's (Loop's funcs); what it decides is
// sched's. It reads no /proc and calls no peer while it holds its lock.
package rounds

import (
	"time"

	"roam/internal/lockorder"
	"roam/internal/sched"
)

// MaxPolicyVersion bounds the version of a policy a peer or the gossip
// hands this node. A load takes the running version plus one, so a
// version at the top of uint64 (from a bad or broken member) would wrap
// the next load to 0 and win for good. The bound leaves room for more
// loads than any cluster makes after the highest version it takes.
const MaxPolicyVersion = 1 << 62

// Newer says whether a policy of version av and text at replaces one of
// version bv and text bt: the higher version, and between two loads of
// one version (made on two nodes at once) the greater text, so that every
// node picks the same.
func Newer(av uint64, at string, bv uint64, bt string) bool {
	return av > bv || (av == bv && at > bt)
}

// Policy is a running policy with its version and load time. The version
// is 0 while it is the config file's; each `roam policy load` takes the
// highest this node knows plus one, and the highest wins across the
// cluster (Newer): a version, not a wall-clock time, since a node whose
// clock is ahead, or a far-future time from the network, would otherwise
// win over every later load. At is for people.
type Policy struct {
	*sched.Scheduler
	Version uint64
	At      time.Time
}

// Rounds is the scheduler's state on one node.
type Rounds struct {
	kick chan struct{}
	mu   lockorder.Mutex // guards everything below
	pol  Policy
	// ledger is the rounds' memory: admissions, heard loads, recent
	// moves, failed moves, and whether a round's moves still run.
	ledger sched.Ledger
	// wake is when the last round's snapshot has a job come of age
	// (sched.Scheduler.Wake): a round runs then.
	wake time.Time
	// prev are the jobs' system call counts at the last round (never
	// nil: sched.Ledger.Complete keeps none for a nil one).
	prev map[string]sched.Sample
}

// New is the rounds of a node that runs the config's policy p, its lock
// of the given rank.
func New(p *sched.Scheduler, rank lockorder.Rank) *Rounds {
	r := &Rounds{kick: make(chan struct{}, 1), pol: Policy{Scheduler: p}, prev: map[string]sched.Sample{}}
	r.mu.Init(rank, "rounds.mu")
	return r
}

// Policy is the policy that runs.
func (r *Rounds) Policy() Policy {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pol
}

// Take runs p unless the running policy is newer (Newer), and returns
// the one it replaced; ok says whether p runs now. A round in progress
// finishes its moves under the old policy.
func (r *Rounds) Take(p Policy) (old Policy, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old = r.pol
	if old.Scheduler != nil && !Newer(p.Version, p.Text(), old.Version, old.Text()) {
		return old, false
	}
	r.pol = p
	return old, true
}

// Reconfigure runs the config's new policy p (version 0) unless a policy
// loaded with `roam policy load` runs, which outlives the config.
func (r *Rounds) Reconfigure(p *sched.Scheduler, at time.Time) (old Policy, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	old = r.pol
	if old.Version != 0 {
		return old, false
	}
	r.pol = Policy{Scheduler: p, At: at}
	return old, true
}

// Kick has the loop consider a round now (a job started or ended, moves
// went through, a peer has room).
func (r *Rounds) Kick() {
	select {
	case r.kick <- struct{}{}:
	default:
	}
}

// Admit judges a policy's move to this node against self, its load now,
// the moves it admitted and has not yet received counted in; pending is
// how many of those there are, the move's own left out.
func (r *Rounds) Admit(mv sched.Move, self sched.Node, now time.Time) (sched.AdmitAnswer, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ledger.Admit(mv, self, now), r.ledger.Pending(now, mv.Job)
}

// Pending is how many admitted moves have not arrived.
func (r *Rounds) Pending(now time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ledger.Pending(now, "")
}

// AdmittedMemMB is what the memory requests of the moves admitted here
// and not arrived add up to, in MiB, but job but's own.
func (r *Rounds) AdmittedMemMB(but string) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ledger.AdmittedMemMB(time.Now(), but)
}

// Withdrawn ends the admission of mv, given up by its source before it
// sent anything; it says whether it ended one.
func (r *Rounds) Withdrawn(mv sched.Move) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ledger.Withdrawn(mv)
}

// Arrived ends the admission of job's move here: it runs here now, or its
// move failed.
func (r *Rounds) Arrived(job string) {
	r.mu.Lock()
	r.ledger.Arrived(job)
	r.mu.Unlock()
}

// Ended forgets job, which ended here.
func (r *Rounds) Ended(job string) {
	r.mu.Lock()
	r.ledger.Ended(job)
	r.mu.Unlock()
}

// Reserved is self (its capacity and least CPU time) with the load of the
// moves admitted and not arrived counted in (sched.Ledger.Reserved).
func (r *Rounds) Reserved(self sched.Node, now time.Time) sched.Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ledger.Reserved(self, now)
}

// Eased says whether node, which refused a move of this node's, has room
// now by the load it sent (sched.Ledger.Eased).
func (r *Rounds) Eased(node string, load, capacity, selfLoad float64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ledger.Eased(node, load, capacity, selfLoad)
}

// Declined records that mv's destination refused it, with its state then.
func (r *Rounds) Declined(mv sched.Move, answer sched.Node, now time.Time) {
	if !(answer.Least >= 0 && answer.Least <= sched.MaxCPUSeconds) {
		answer.Least = 0 // a peer's answer: what no node sends counts as unsaid
	}
	if !(answer.MemHeldMB >= 0 && answer.MemHeldMB <= 1<<30) {
		answer.MemHeldMB = 0
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ledger.Forget(mv)
	r.ledger.Declined(mv, answer, now)
}

// Failed records that mv was tried and failed.
func (r *Rounds) Failed(mv sched.Move, now time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.ledger.Forget(mv)
	r.ledger.Failed(mv.Job, now)
}

// Recent is the moves the ledger remembers (sched.Ledger.Recent).
func (r *Rounds) Recent(now time.Time) []sched.Move {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ledger.Recent(now)
}

// Probed is a job as the agent's probes saw it for a round
// (sched.Probed).
type Probed = sched.Probed

// Complete fills in a round's snapshot s, whose Self and Peers the agent
// measured, with the probed jobs (here: the ids of every job running
// here, probed or not), by sched.Ledger.Complete, which the simulator
// calls too. It returns the least CPU time a runnable job here has had
// (sched.Node.Least).
func (r *Rounds) Complete(s *sched.Snapshot, probed []Probed, here []string) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	least, next := r.ledger.Complete(s, probed, here, r.prev)
	r.prev = next
	return least
}

// CompleteKept is Complete, with the ledger's state and the jobs' last
// samples as they were before it (a recorded round's, package
// decisions).
func (r *Rounds) CompleteKept(s *sched.Snapshot, probed []Probed, here []string) (least float64, ledger sched.LedgerState, prev map[string]sched.Sample) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ledger, prev = r.ledger.State(), r.prev
	least, r.prev = r.ledger.Complete(s, probed, here, r.prev)
	return least, ledger, prev
}

// Round is what Loop needs of the agent: a snapshot of the node and its
// jobs, the policy's decision on it, and one move carried out (whether
// the job moved).
type Round struct {
	Snapshot func() sched.Snapshot
	Decide   func(*sched.Scheduler, sched.Snapshot) []sched.Move
	Move     func(sched.Move) bool
}
