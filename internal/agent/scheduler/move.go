package scheduler

// A policy's moves: the source's (the destination's admission, then the
// migration) and the destination's (its admission, and the end of one
// its source gave up).

import (
	"fmt"
	"net/http"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/migrate"
	"roam/internal/sched"
)

// Admit is the destination's side of a policy's move (POST
// peer.MigrateAdmit): the ledger judges it against this node's load now,
// the moves it admitted and has not yet received counted in
// (sched.Ledger.Admit).
func (s *Scheduler) Admit(mv sched.Move) (peer.AdmitAnswer, error) {
	if mv.Job == "" || mv.To != s.c.Node {
		return peer.AdmitAnswer{}, errkind.New(peer.ErrBadRequest, "move of job %q to node %q: not a move to node %s", mv.Job, mv.To, s.c.Node)
	}
	if err := mv.Check(); err != nil {
		return peer.AdmitAnswer{}, errkind.New(peer.ErrBadRequest, "%v", err)
	}
	runnable := s.Runnable()
	now := time.Now()
	ans, pending := s.c.Rounds.Admit(mv, s.self(runnable), now)
	r := peer.AdmitAnswer{Load: ans.Load, MemFreeMB: ans.MemFreeMB, Least: ans.Least, MemHeldMB: ans.MemHeldMB}
	if ans.Refused != nil {
		r.Refused = fmt.Sprintf("%v (%d runnable threads here, %d admitted moves not arrived)", ans.Refused, runnable, pending)
	}
	return r, nil
}

// Withdraw is DELETE peer.MigrateAdmit: the source of an admitted move
// gave it up before sending anything, and the place held for its job
// ends now rather than after sched.AdmitHold (only that admission:
// sched.Ledger.Withdrawn). It says whether it ended one.
func (s *Scheduler) Withdraw(mv sched.Move) (peer.WithdrawAnswer, error) {
	if mv.Job == "" || mv.To != s.c.Node {
		return peer.WithdrawAnswer{}, errkind.New(peer.ErrBadRequest, "withdrawal of the move of job %q to node %q: not a move to node %s", mv.Job, mv.To, s.c.Node)
	}
	return peer.WithdrawAnswer{Ended: s.c.Rounds.Withdrawn(mv)}, nil
}

// Move carries out one move of a round: the destination's admission,
// then the migration; it says whether the job moved.
func (s *Scheduler) Move(mv sched.Move) bool {
	var ar peer.AdmitAnswer
	if err := s.c.Peers.Call(mv.To, http.MethodPost, peer.MigrateAdmit, mv, &ar); err == nil && ar.Refused != "" {
		p, _ := s.c.Members.Get(mv.To)
		e, _ := s.c.Members.Heard(mv.To)
		s.c.Rounds.Declined(mv, sched.Node{ID: mv.To, Capacity: p.Capacity, Load: ar.Load, MemFreeMB: ar.MemFreeMB, Least: ar.Least,
			MemJobsMB: e.MemJobsMB, MemHeldMB: ar.MemHeldMB}, time.Now())
		s.c.Event(api.Event{Kind: "declined", Job: mv.Job, UID: s.c.Jobs.Owner(mv.Job), From: s.c.Node, To: mv.To, Why: mv.Why + "; declined by node " + mv.To + ": " + ar.Refused})
		return false
	}
	m, err := s.c.Migrate(mv)
	e := api.Event{Kind: "migrate", Job: mv.Job, UID: s.c.Jobs.Owner(mv.Job), From: s.c.Node, To: mv.To, Why: mv.Why, FreezeMS: m.FreezeMS}
	if err != nil {
		s.withdraw(mv)
		s.c.Rounds.Failed(mv, time.Now())
		e.Kind, e.Why = "failed", mv.Why+"; failed: "+err.Error()
		if reason, pinned := migrate.PinReason(err); pinned {
			s.c.Jobs.SetUnmovable(mv.Job, reason)
		}
	}
	s.c.Event(e)
	return err == nil
}

// withdraw tells mv's destination, in the background, that this node gave
// the move up: a move that failed before its stream reached the
// destination (the job was found pinned, or had ended) left a place held
// there that made the node refuse work, and look busy to every peer, for
// sched.AdmitHold. After a later failure the destination has ended the
// admission itself, and this ends nothing. The withdrawal names the
// decision (its time), so a later admission of the job stays.
func (s *Scheduler) withdraw(mv sched.Move) {
	s.c.Group.Add(1)
	go func() {
		defer s.c.Group.Done()
		if err := s.c.Peers.Call(mv.To, http.MethodDelete, peer.MigrateAdmit, mv, nil); err != nil {
			s.c.Log.Debug("withdraw an admission", "job", mv.Job, "node", mv.To, "err", err)
		}
	}()
}

// ReleaseHold hands a job placed by hand back to the policies (POST
// peer.Hold).
func (s *Scheduler) ReleaseHold(id string) error {
	found, err := s.c.Jobs.ReleaseHold(id)
	if !found {
		return errkind.New(peer.ErrNotFound, "job %s is not running on node %s", id, s.c.Node)
	}
	if err != nil {
		s.c.Log.Error("job table", "err", err)
	}
	s.c.Rounds.Kick()
	return nil
}
