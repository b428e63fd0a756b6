package migrate

import (
	"errors"
	"fmt"
	"time"
)

// SourceState is where a source's migration stands.
type SourceState uint8

const (
	SrcNew        SourceState = iota // not started
	SrcChecking                      // pins, then the destination's check and page sink
	SrcDumping                       // pending persisted; the job is frozen and dumped
	SrcSending                       // the stream goes; waiting for "ready"
	SrcCommitting                    // committed persisted; killing our copy, sending the commit
	SrcPostCopy                      // lazy: committed, the destination runs, our page server serves
	SrcDone                          // committed, nothing left to do but tell the home
	SrcAborted                       // aborted persisted; our copy runs
	// A checkpoint's own states (source_file.go).
	SrcWriting    // the sealed file is written under a temporary name
	SrcSealing    // the whole file is renamed into place
	SrcDelivering // the sealed file goes to whoever keeps it
)

var srcNames = [...]string{"new", "checking", "dumping", "sending", "committing", "post-copy", "done", "aborted",
	"writing", "sealing", "delivering"}

func (s SourceState) String() string {
	if int(s) < len(srcNames) {
		return srcNames[s]
	}
	return fmt.Sprintf("source-state-%d", s)
}

// Errors the source machine reports in Finish.
var (
	// ErrPinned: the job cannot move; the message says why.
	ErrPinned = errors.New("pinned")
	// ErrRestarted: the source agent restarted before it decided.
	ErrRestarted = errors.New("source agent restarted during the migration")
)

// Events of the source machine. Each answers the action of the same name,
// except Start, Tick and Recover.
type (
	// Start begins a migration of Job (home Home) to To, or, with Target
	// TargetFile, a checkpoint of it into a sealed file (source_file.go).
	Start struct {
		MID, Job, Home, To string
		Lazy               bool
		Target             Target
		// Stop: a checkpoint ends the job once its file is delivered.
		Stop bool
		Why  string
		// Seq is the job's moves once this one commits; Inc its copy's
		// incarnation (job.Record.Inc): a note to the home carries both.
		Seq, Inc int
		// PID and Tix name the job's root process here.
		PID int
		Tix uint64
	}
	// LocalChecked answers CheckLocal: Pin says why the job cannot move,
	// or is ""; Err, why it cannot move now, for a reason that may pass
	// (the move is refused, and the job is not pinned).
	LocalChecked struct {
		Pin string
		Err error
	}
	// CheckAnswer answers SendCheck: the destination reaches the job's
	// files and has opened a page sink (eager).
	CheckAnswer struct{ Err error }
	// Dumped answers Dump: the images are written (eager: the pages are
	// in the destination's sink); the job is stopped.
	Dumped struct{ Err error }
	// ReadyAnswer answers SendImages: the destination holds a restored,
	// stopped copy (Err nil), or not (gone, stalled, restore failed).
	ReadyAnswer struct{ Err error }
	// CopyGone answers Kill: the source's copy can never run again.
	CopyGone struct{}
	// CommitAnswer answers SendCommit.
	CommitAnswer struct{ Err error }
	// PagesDone answers WaitPages (lazy): the page server has ended.
	PagesDone struct{ Err error }
	// HomeAnswer answers NoteHome.
	HomeAnswer struct{ Err error }
	// Tick is the clock; the driver sends it at the time a Wake asked for.
	Tick struct{}
)

// Actions of the source machine, carried out by its driver in order.
type (
	// CheckLocal: inspect the job for pins; answer LocalChecked.
	CheckLocal struct{}
	// SendCheck: ask the destination whether it can take the job, and
	// (eager) to open a page sink; answer CheckAnswer.
	SendCheck struct{}
	// Persist: store the record durably before the next action.
	Persist struct{ Record Record }
	// Dump: freeze the job and dump it, leaving it stopped; answer Dumped.
	Dump struct{}
	// SendImages: send the header and archive; answer ReadyAnswer.
	SendImages struct{}
	// Thaw: resume the source's copy (idempotent).
	Thaw struct{}
	// Kill: kill every process of the source's stopped copy, so that none
	// ever runs again (their exit, the freeing of their memory, need not
	// be waited for)
	// (idempotent); answer CopyGone.
	Kill struct{}
	// SendCommit: tell the destination to resume; answer CommitAnswer.
	SendCommit struct{}
	// SendAbort: tell the destination to discard its copy; best effort,
	// no answer (the destination asks if it misses it).
	SendAbort struct{}
	// WaitPages (lazy): wait until the page server has served every page;
	// answer PagesDone.
	WaitPages struct{}
	// NoteHome: tell the job's home node how the migration went
	// (idempotent by MID); answer HomeAnswer.
	NoteHome struct {
		OK    bool
		Error string
	}
	// Finish: the migration's result for whoever asked for it; the
	// driver releases the job. Sent once.
	Finish struct{ Err error }
	// Wake: send a Tick at At.
	Wake struct{ At time.Time }
)

// Source is the source side of one migration.
type Source struct {
	state    SourceState
	rec      Record
	err      error
	tries    int          // commit sends so far
	homeTry  int          // home notes so far
	retryAt  time.Time    // when the pending retry (commit or home) is due
	retrying SourceAction // the action to retry at retryAt, or nil
	finished bool
	// sentCheck: the local check passed and the destination was asked.
	sentCheck bool
	// stored: a Persist was asked for; a refusal that froze nothing
	// persists nothing.
	stored      bool
	waitingHome bool
}

// State is the machine's state.
func (s *Source) State() SourceState { return s.state }

// Record is the machine's record as last persisted (or to be persisted).
func (s *Source) Record() Record { return s.rec }

// Err is why the migration aborted, or nil.
func (s *Source) Err() error { return s.err }

// Settled says nothing remains to be done.
func (s *Source) Settled() bool { return s.rec.settled() && s.finished }

// Step takes one event at now and returns the actions to carry out.
// An event the state does not expect changes nothing and asks for nothing.
func (s *Source) Step(now time.Time, ev SourceEvent) []SourceAction {
	switch e := ev.(type) {
	case Start:
		if s.state != SrcNew {
			return nil
		}
		s.rec = Record{MID: e.MID, Job: e.Job, Home: e.Home, To: e.To, Lazy: e.Lazy, Target: e.Target, Stop: e.Stop, Why: e.Why,
			Seq: e.Seq, Inc: e.Inc, PID: e.PID, Tix: e.Tix, Outcome: Pending, Started: now}
		if e.Target == TargetFile {
			s.rec.To, s.rec.Lazy, s.rec.Seq = "", false, 0
		} else {
			s.rec.Stop = false
		}
		s.state = SrcChecking
		return []SourceAction{CheckLocal{}}
	case HomeAnswer:
		return s.homeAnswer(now, e.Err)
	case Tick:
		if s.retrying == nil || now.Before(s.retryAt) {
			return nil
		}
		act := s.retrying
		s.retrying = nil
		return []SourceAction{act}
	}
	if s.rec.Target == TargetFile {
		return s.checkpointStep(now, ev)
	}
	switch e := ev.(type) {
	case LocalChecked:
		if s.state != SrcChecking || s.sentCheck {
			return nil
		}
		if e.Pin != "" {
			return s.refuse(now, &Pinned{Job: s.rec.Job, Reason: e.Pin}, false)
		}
		if e.Err != nil {
			return s.refuse(now, fmt.Errorf("%s: %w", s.rec.Job, e.Err), false)
		}
		s.sentCheck = true
		return []SourceAction{SendCheck{}}
	case CheckAnswer:
		if s.state != SrcChecking || !s.sentCheck {
			return nil
		}
		if e.Err != nil {
			// The destination may have opened a sink before it failed
			// to answer: tell it to drop it.
			return s.refuse(now, fmt.Errorf("destination %s: %w", s.rec.To, e.Err), true)
		}
		s.state = SrcDumping
		return []SourceAction{s.persist(), Dump{}}
	case Dumped:
		if s.state != SrcDumping {
			return nil
		}
		if e.Err != nil {
			return s.abort(now, e.Err)
		}
		s.state = SrcSending
		return []SourceAction{SendImages{}}
	case ReadyAnswer:
		if s.state != SrcSending {
			return nil
		}
		if e.Err != nil {
			return s.abort(now, fmt.Errorf("to %s: %w", s.rec.To, e.Err))
		}
		return s.commit(now)
	case CopyGone:
		return s.copyGone(now)
	case CommitAnswer:
		return s.commitAnswer(now, e.Err)
	case PagesDone:
		if s.state != SrcPostCopy {
			return nil
		}
		// Every page has left, or the page server failed; either way our
		// copy never runs again.
		return []SourceAction{Kill{}}
	}
	return nil
}

// persist is the Persist action of the record as it is now.
func (s *Source) persist() Persist {
	s.stored = true
	return Persist{s.rec}
}

// refuse ends a migration that froze nothing: nothing to persist or thaw.
func (s *Source) refuse(now time.Time, err error, tellDest bool) []SourceAction {
	s.state, s.err = SrcAborted, err
	s.rec.Outcome, s.rec.Error, s.rec.DecidedAt = Aborted, err.Error(), now
	s.waitingHome = true
	var acts []SourceAction
	if tellDest {
		acts = append(acts, SendAbort{})
	}
	return append(acts, NoteHome{OK: false, Error: err.Error()})
}

// abort decides "aborted" once the job may be frozen: persist, then thaw.
func (s *Source) abort(now time.Time, err error) []SourceAction {
	s.state, s.err = SrcAborted, err
	s.rec.Outcome, s.rec.Error, s.rec.DecidedAt = Aborted, err.Error(), now
	s.waitingHome = true
	return []SourceAction{s.persist(), Thaw{}, SendAbort{}, NoteHome{OK: false, Error: err.Error()}}
}

// commit decides "committed": persist, then end our copy (eager) or let
// the destination run first (lazy: CRIU's page server holds our copy).
func (s *Source) commit(now time.Time) []SourceAction {
	s.state = SrcCommitting
	s.rec.Outcome, s.rec.DecidedAt = Committed, now
	if s.rec.Lazy {
		s.tries = 1
		return []SourceAction{s.persist(), SendCommit{}}
	}
	return []SourceAction{s.persist(), Kill{}}
}

func (s *Source) copyGone(now time.Time) []SourceAction {
	switch {
	case s.state == SrcCommitting && !s.rec.Lazy && !s.rec.Killed:
		s.rec.Killed = true
		s.tries = 1
		return []SourceAction{s.persist(), SendCommit{}}
	case s.state == SrcPostCopy && !s.rec.Killed:
		s.rec.Killed = true
		s.state = SrcDone
		return append([]SourceAction{s.persist()}, s.noteHomeOK()...)
	}
	return nil
}

func (s *Source) commitAnswer(now time.Time, err error) []SourceAction {
	if s.state != SrcCommitting || s.tries == 0 {
		return nil
	}
	if err != nil && s.tries < CommitTries {
		s.tries++
		s.retrying, s.retryAt = SendCommit{}, now.Add(RetryEvery)
		return []SourceAction{Wake{s.retryAt}}
	}
	s.tries = 0
	// Without an answer the destination asks us, and we answer from the
	// persisted decision: the commit stands either way.
	s.rec.Acked = err == nil
	var acts []SourceAction
	if s.rec.Acked {
		acts = append(acts, s.persist())
	}
	if s.rec.Lazy {
		s.state = SrcPostCopy
		return append(acts, WaitPages{})
	}
	s.state = SrcDone
	return append(acts, s.noteHomeOK()...)
}

func (s *Source) noteHomeOK() []SourceAction {
	s.waitingHome = true
	return []SourceAction{NoteHome{OK: true}}
}

// homeAnswer: the home has the migration; the caller gets its answer
// once, after the first try either way (the home is told again until it
// has it).
func (s *Source) homeAnswer(now time.Time, err error) []SourceAction {
	if !s.waitingHome || (s.state != SrcDone && s.state != SrcAborted) {
		return nil
	}
	var acts []SourceAction
	if !s.finished {
		s.finished = true
		acts = append(acts, Finish{s.err})
	}
	s.homeTry++
	if err != nil {
		s.retrying = NoteHome{OK: s.state == SrcDone, Error: s.rec.Error}
		s.retryAt = now.Add(homeRetry(s.homeTry))
		return append(acts, Wake{s.retryAt})
	}
	s.waitingHome = false
	s.rec.Noted = true
	if s.rec.settled() {
		s.rec.SettledAt = now
	}
	if !s.stored {
		// A refused migration froze nothing and persisted nothing.
		return acts
	}
	return append([]SourceAction{s.persist()}, acts...)
}

// Recover rebuilds a source machine from its persisted record after the
// agent restarted, and returns what it must do to finish.
func Recover(now time.Time, r Record) (*Source, []SourceAction) {
	s := &Source{rec: r, stored: true}
	if r.Target == TargetFile {
		return s, s.recoverCheckpoint(now)
	}
	switch r.Outcome {
	case Pending:
		// Never decided: the destination never resumed its copy; ours is
		// the job.
		s.state = SrcDumping
		return s, s.abort(now, ErrRestarted)
	case Aborted:
		s.state, s.err = SrcAborted, errors.New(r.Error)
		s.finished = true
		acts := []SourceAction{Thaw{}, SendAbort{}}
		if !r.Noted {
			s.waitingHome = true
			acts = append(acts, NoteHome{OK: false, Error: r.Error})
		}
		return s, acts
	}
	// Committed: our copy never runs again.
	s.finished = true
	if !r.Killed {
		s.state = SrcCommitting
		if r.Lazy {
			// The page server died with the agent: the pages it had not
			// served are lost, and so is the copy at the destination
			// (the documented post-copy window). Ours goes.
			s.state = SrcPostCopy
		}
		return s, []SourceAction{Kill{}}
	}
	s.state = SrcDone
	var acts []SourceAction
	if !r.Acked && !r.Lazy {
		acts = append(acts, SendCommit{})
		s.state, s.tries = SrcCommitting, CommitTries
	}
	if !r.Noted && s.state == SrcDone {
		acts = append(acts, s.noteHomeOK()...)
	}
	return s, acts
}
