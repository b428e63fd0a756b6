package sched

// The round's ledger: what a node's scheduler remembers from one round to
// the next, and the rules that use it. As a destination, the moves it
// agreed to take (admissions); as a source, its peers' loads from their
// answers (heard loads), its moves of the last seconds (recent moves), the
// moves of its jobs that failed (failure memory), and whether its last
// round's moves still run (pacing).
//
// Like the rest of the package it is pure: the agent passes the time in,
// holds its own lock around it, and does the I/O (asking the destination,
// moving the job, the timer of the loop).

import (
	"maps"
	"slices"
	"time"
)

// Tunables of the ledger, each with why it has its value.
const (
	// AdmitHold is how long an admitted move counts in the destination's
	// load if its job never arrives (the source gave up, or died). Jobs
	// that do arrive end theirs at once (Arrived), so it bounds only how
	// long a node refuses work for a move that will not come.
	AdmitHold = 15 * time.Second
	// RecentWindow is how long a source keeps its moves for Effective: a
	// peer not heard from in this long is hardly worth a decision.
	RecentWindow = 30 * time.Second
	// RefusedRetries rounds at most, within RefusedWindow, follow at once
	// a round whose moves a destination refused (Finished). The refusal's
	// answer corrects the source's view of that node (Declined), so the
	// next round sends the job elsewhere, where another source's job may
	// have gone first; the bound is for rounds that keep meeting new
	// refusals (a peer that keeps saying less load than it has).
	RefusedRetries = 4
	RefusedWindow  = time.Second
)

// Ledger is one node's memory between rounds. The zero value is ready;
// it is not safe for concurrent use (the agent holds a lock around it).
type Ledger struct {
	// admitted are the moves this node, as a destination, agreed to take
	// and has not yet received, by job id.
	admitted map[string]admission
	// heard are peers' loads from their answers to moves, by node id.
	heard map[string]heardLoad
	// recent are this node's moves started within RecentWindow, minus
	// those that did not happen.
	recent []Move
	// failed is when a policy's move of each job last failed, by job id.
	failed map[string]time.Time
	// running is set while a round's moves are carried out.
	running bool
	// refused is set when a destination refused one of the running
	// round's moves for a reason its answer gives (Declined); retried are
	// the times that ran a round at once within RefusedWindow (Finished).
	refused bool
	retried []time.Time
}

type admission struct {
	mv    Move
	until time.Time
}

type heardLoad struct {
	load, memFreeMB, least, memHeldMB float64
	at                                time.Time
}

// ---- admissions (the destination's side) ----

// AdmitAnswer is a destination's answer to a policy's move.
type AdmitAnswer struct {
	// Refused says why the destination will not take the move; nil: it
	// takes it, and holds a place for it (Arrived ends that).
	Refused error
	// Load and MemFreeMB are the destination's, with the moves it admitted
	// and has not yet received counted in (this one too, when taken):
	// fresher than the source's load vector, which the source should
	// believe until the vector catches up (Heard).
	Load      float64
	MemFreeMB float64
	// Least is the destination's Node.Least, the admitted moves' jobs
	// counted in: a turn refused for want of a lead is not asked again
	// until the lead is there.
	Least float64
	// MemHeldMB is the destination's Node.MemHeldMB, the admitted moves'
	// requests counted in: a move refused for want of room is not asked
	// again until there is room.
	MemHeldMB float64
}

// Reserved is self (this node's load and free memory as measured at
// now) with the moves it admitted and has not yet received counted in,
// each at least one runnable thread. An admission whose deadline has
// passed by now is forgotten: its job is not coming.
func (l *Ledger) Reserved(self Node, now time.Time) Node {
	return l.reserved(self, now, "", false)
}

// reserved is Reserved, without job's own admission when but is set.
func (l *Ledger) reserved(self Node, now time.Time, job string, but bool) Node {
	for _, id := range l.admittedIDs() {
		a := l.admitted[id]
		if now.After(a.until) {
			delete(l.admitted, id)
			continue
		}
		if !but || id != job {
			self.take(a.mv)
		}
	}
	return self
}

// admittedIDs are the admitted jobs in order: sums over them are then
// the same bits every time (a map's order would change their rounding,
// and a seeded simulation's results with it).
func (l *Ledger) admittedIDs() []string {
	if len(l.admitted) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(l.admitted))
}

// Admit is the destination's side of a policy's move: self's load now,
// with the moves it admitted and has not yet received counted in
// (Reserved), must still make the move worthwhile (Admit). The source
// decided from a load-vector entry up to a second old, and two sources
// that saw the same idle node would otherwise both send it a job. A move
// taken counts in self's load until its job arrives or until
// now+AdmitHold, whichever comes first. A job admitted again (its move
// asked once more) takes the place of its earlier admission: it is judged
// and counted without it, never twice.
func (l *Ledger) Admit(mv Move, self Node, now time.Time) AdmitAnswer {
	all := l.Reserved(self, now)
	if err := mv.Check(); err != nil {
		return AdmitAnswer{Refused: err, Load: all.Load, MemFreeMB: all.MemFreeMB, Least: all.Least, MemHeldMB: all.MemHeldMB}
	}
	others := l.reserved(self, now, mv.Job, true)
	if err := Admit(mv, others); err != nil {
		return AdmitAnswer{Refused: err, Load: all.Load, MemFreeMB: all.MemFreeMB, Least: all.Least, MemHeldMB: all.MemHeldMB}
	}
	if l.admitted == nil {
		l.admitted = map[string]admission{}
	}
	l.admitted[mv.Job] = admission{mv, now.Add(AdmitHold)}
	others.take(mv)
	return AdmitAnswer{Load: others.Load, MemFreeMB: others.MemFreeMB, Least: others.Least, MemHeldMB: others.MemHeldMB}
}

// AdmittedMemMB is what the memory requests of the admitted moves not
// yet arrived add up to, in MiB, but job but's own: the node that takes
// a job counts them (MemFits) with the requests of the jobs it holds.
func (l *Ledger) AdmittedMemMB(now time.Time, but string) float64 {
	n := 0.0
	for _, id := range l.admittedIDs() {
		if a := l.admitted[id]; id != but && !now.After(a.until) {
			n += a.mv.MemReqMB
		}
	}
	return n
}

// Pending is how many admitted moves, other than job's own (Admit judges
// a move asked again without its earlier admission), have not arrived by
// now, their deadlines not passed: for the reason of a refusal.
func (l *Ledger) Pending(now time.Time, job string) int {
	n := 0
	for id, a := range l.admitted {
		if id != job && !now.After(a.until) {
			n++
		}
	}
	return n
}

// Arrived ends the admission of job's move: it runs here now (and the
// node's own measure counts it), or its move failed. Left to its
// deadline, the reservation of a job that arrived and has ended since
// would count against this node for up to AdmitHold, and an idle node
// would refuse work.
func (l *Ledger) Arrived(job string) {
	delete(l.admitted, job)
}

// Withdrawn ends the admission of mv, which its source gave up before
// sending anything (the job turned out pinned, or it ended after the
// answer): left to its deadline, the place held for it would make this
// node refuse work, and look busy in the load it sends, for AdmitHold. It
// ends only that admission, taken from the same source for the same
// decision (From and At): a later admission of the job, from this source
// or another, stays. It says whether it ended one.
func (l *Ledger) Withdrawn(mv Move) bool {
	a, ok := l.admitted[mv.Job]
	if !ok || a.mv.From != mv.From || !a.mv.At.Equal(mv.At) {
		return false
	}
	delete(l.admitted, mv.Job)
	return true
}

// ---- heard loads, recent moves and failures (the source's side) ----

// Heard records a peer's load, free memory and least CPU time (Node.Least)
// as its answer to a move gave them at now.
func (l *Ledger) Heard(answer Node, now time.Time) {
	if l.heard == nil {
		l.heard = map[string]heardLoad{}
	}
	l.heard[answer.ID] = heardLoad{answer.Load, answer.MemFreeMB, answer.Least, answer.MemHeldMB, now}
}

// Declined records a destination's refusal of move mv at now, with its
// answer (its id, capacity, and the load, free memory and least CPU time
// it gave): the
// answer stands for its load-vector entry (Heard). If the answer explains
// the refusal (judged against it, the move no longer passes Admit: the
// node took another job since the vector's entry), the batch's end runs a
// round at once (Finished), which sends the job elsewhere. One it does
// not explain (a node whose policy disagrees with this one's, or that
// gives less load than it has) waits for the period: the next round
// would choose that node again.
func (l *Ledger) Declined(mv Move, answer Node, now time.Time) {
	l.Heard(answer, now)
	if l.running && Admit(mv, answer) != nil {
		l.refused = true
	}
}

// Eased says whether a load entry just received from node (load, per
// unit of its capacity) is news for this node's scheduler that the load
// vector alone would not tell (load.Eases): node refused one of this
// node's moves (Heard) at a load higher by half a thread or more, and
// could take one of this node's threads now and stay below selfLoad. The
// round after the refusal chose no other node, and the vector's last
// entry may have shown room all along: a smoothed load lags the jobs that
// came and went. The agent then runs a round at once. Once per refusal:
// saying yes forgets the heard load (the entry, newer, stands in for it),
// so a stream of entries cannot run this node's scheduler without end.
func (l *Ledger) Eased(node string, load, capacity, selfLoad float64) bool {
	h, ok := l.heard[node]
	if !ok || capacity <= 0 || load+1/capacity >= selfLoad || load > h.load-0.5/capacity {
		return false
	}
	delete(l.heard, node)
	return true
}

// ApplyHeard gives the peers (as the load vector has them) the loads their
// answers gave, where an answer came after the vector's entry was
// received; a heard load the vector has caught up with is forgotten.
func (l *Ledger) ApplyHeard(peers []Node) {
	for i, p := range peers {
		h, ok := l.heard[p.ID]
		if !ok {
			continue
		}
		if h.at.After(p.Received) {
			peers[i].Load, peers[i].MemFreeMB, peers[i].Least, peers[i].Received = h.load, h.memFreeMB, h.least, h.at
			peers[i].MemHeldMB = h.memHeldMB
		} else {
			delete(l.heard, p.ID)
		}
	}
}

// Forget takes a move that did not happen (refused, or failed) out of the
// recent moves, so that its target's load is not counted higher for it.
func (l *Ledger) Forget(mv Move) {
	for i, m := range l.recent {
		if m.Job == mv.Job && m.To == mv.To && m.At.Equal(mv.At) {
			l.recent = slices.Delete(l.recent, i, i+1)
			return
		}
	}
}

// Ended takes an ended job's moves out of the recent moves. Effective
// counts a recent move in its target's load for as long as the target's
// load-vector entry is older than the move's settling, which can be many
// seconds on a quiet cluster (a node hears from a given peer every few
// intervals): a job that has ended since would keep an idle node looking
// busy, and the next burst would pass it over for nodes already taken.
func (l *Ledger) Ended(job string) {
	l.recent = slices.DeleteFunc(l.recent, func(m Move) bool { return m.Job == job })
}

// Recent are the moves started less than RecentWindow before now, for a
// snapshot (a copy); older ones are forgotten.
func (l *Ledger) Recent(now time.Time) []Move {
	l.recent = slices.DeleteFunc(l.recent, func(m Move) bool { return now.Sub(m.At) >= RecentWindow })
	return slices.Clone(l.recent)
}

// Failed remembers that a policy's move of job failed at now: until the
// job moves, it counts as moved then, so the manager's hysteresis keeps it
// from being tried again at once (ApplyFailures).
func (l *Ledger) Failed(job string, now time.Time) {
	if l.failed == nil {
		l.failed = map[string]time.Time{}
	}
	l.failed[job] = now
}

// ApplyFailures sets the LastMoved of each job whose move failed after it
// last moved to the time of the failure. here are all the jobs the node
// holds (movable or not): the failures of the others (gone, ended) are
// forgotten.
func (l *Ledger) ApplyFailures(jobs []Job, here []string) {
	for id := range l.failed {
		if !slices.Contains(here, id) {
			delete(l.failed, id)
		}
	}
	for i, j := range jobs {
		if at, ok := l.failed[j.ID]; ok && at.After(j.LastMoved) {
			jobs[i].LastMoved = at
		}
	}
}

// ---- pacing ----

// Trigger is what woke the scheduler's loop.
type Trigger int

const (
	// ByPeriod: the policy's period passed (NextRound).
	ByPeriod Trigger = iota
	// ByKick: an event — a job started or ended, a hold was released, a
	// policy was loaded, a batch of moves went through (Finished).
	ByKick
)

// NextRound is when the loop wakes by period: the period is counted from
// from, the end of the last round (or the last period or wake that ran
// none; a kick that ran none does not count); or at wake
// (Scheduler.Wake of the last round's snapshot: a job becomes old enough
// to move), if that is sooner and after from. A time gone by wakes it at
// once.
func (l *Ledger) NextRound(from time.Time, period time.Duration, wake time.Time) time.Time {
	next := from.Add(period)
	if wake.After(from) && wake.Before(next) {
		return wake
	}
	return next
}

// RoundDue says whether a round runs now, woken by tr under a policy that
// is passive (has a jobs probe) or not. A kick runs a round only for a
// passive policy: events are what its jobs probe reads; an active one
// waits for its period. No round runs while the last round's moves still
// run: the loads do not show them yet, and Finished says when one follows.
func (l *Ledger) RoundDue(tr Trigger, passive bool) bool {
	if tr == ByKick && !passive {
		return false
	}
	return !l.running
}

// Started records a round's moves, carried out from now on: they are
// recent moves (Effective counts them in their targets' loads), and no
// round runs until Finished. No moves: nothing runs.
func (l *Ledger) Started(moves []Move) {
	if len(moves) == 0 {
		return
	}
	l.running = true
	l.recent = append(l.recent, moves...)
}

// Finished ends the batch of moves Started, at now; again says whether to
// kick a round at once: if one of them went through (moved), jobs may be
// left to spread, and a round that came while they ran was skipped, so
// judging again now is better than a period later. So too if the last
// round's wake (a job coming of age, Scheduler.Wake) passed while they
// ran: the round it was for was skipped. And if a destination refused one
// for a reason its answer gives (Declined), up to RefusedRetries times
// within RefusedWindow (a refusal past that waits for the period): two
// nodes that saw the same idle node sent it a job each, and the one
// refused has a job that still waits; its next round, a period later,
// would leave the other idle nodes idle that long.
func (l *Ledger) Finished(moved bool, now, wake time.Time) (again bool) {
	l.running = false
	refused := l.refused
	l.refused = false
	if moved || !wake.IsZero() && !wake.After(now) {
		return true
	}
	l.retried = slices.DeleteFunc(l.retried, func(at time.Time) bool { return now.Sub(at) >= RefusedWindow })
	if refused && len(l.retried) < RefusedRetries {
		l.retried = append(l.retried, now)
		return true
	}
	return false
}
