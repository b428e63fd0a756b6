package migrate

import (
	"errors"
	"fmt"
	"time"
)

// A checkpoint is a source migration whose destination is a sealed file
// (checkpoint.go has its format): the same machine, started with Target
// TargetFile, takes the same first steps, writes the file where a
// migration sends its stream, and ends the same way for the job: thawed,
// or (roam checkpoint --stop) killed once "committed" is persisted.
//
//	Checking    CheckLocal: the pins of a checkpoint
//	Dumping     Persist(pending); Dump: the job frozen and dumped
//	Writing     Thaw (unless Stop); WriteFile: under a temporary name
//	Sealing     SealFile: renamed into place, whole and sealed
//	Delivering  Deliver: to the user, or to the node that keeps it
//	Committing  Persist(committed); with Stop, Kill the frozen job
//	Done        NoteHome(ok) → Finish
//
// Any failure before the delivery (a pin, a dump, write, rename or
// delivery error, an agent restart) aborts: Persist(aborted), Thaw,
// RemoveFile, NoteHome(failed). So the file is whole and sealed under its
// final name or absent, and the job keeps its one copy, running (a job
// frozen for the file is a copy that is not running).

// Target is where a source's run takes the job.
type Target string

const (
	TargetNode Target = ""           // a migration to another node (Record.To)
	TargetFile Target = "checkpoint" // a checkpoint: a sealed file
)

// Events of a checkpoint, besides the migration's (source.go).
type (
	// Written answers WriteFile: the whole file, its seal included, is
	// written and synced under its temporary name (Err nil), or not.
	Written struct{ Err error }
	// Sealed answers SealFile: the file is under its final name.
	Sealed struct{ Err error }
	// Delivered answers Deliver: whoever keeps the file has it.
	Delivered struct{ Err error }
)

// Actions of a checkpoint, besides the migration's (source.go).
type (
	// WriteFile: write the checkpoint file of the dumped images, sealed,
	// under a temporary name, and sync it; answer Written. The job may
	// run meanwhile: the images and the spool's sizes are of the freeze.
	WriteFile struct{}
	// SealFile: rename the written file to its final name (and sync its
	// directory): a file under that name is always whole and sealed;
	// answer Sealed.
	SealFile struct{}
	// Deliver: hand the sealed file to whoever keeps it (the user's
	// roam checkpoint, the node that keeps a periodic checkpoint);
	// answer Delivered.
	Deliver struct{}
	// RemoveFile: remove the checkpoint file under its temporary and its
	// final name, whichever is there, and the images (idempotent).
	RemoveFile struct{}
)

// ErrNotDelivered: a checkpoint's file was sealed but not delivered.
var ErrNotDelivered = errors.New("checkpoint not delivered")

// checkpointStep is Step for a checkpoint, past Start, HomeAnswer and Tick.
func (s *Source) checkpointStep(now time.Time, ev SourceEvent) []SourceAction {
	switch e := ev.(type) {
	case LocalChecked:
		if s.state != SrcChecking {
			return nil
		}
		if e.Pin != "" {
			return s.refuse(now, &Pinned{Job: s.rec.Job, Reason: e.Pin}, false)
		}
		if e.Err != nil {
			return s.refuse(now, fmt.Errorf("%s: %w", s.rec.Job, e.Err), false)
		}
		s.state = SrcDumping
		return []SourceAction{s.persist(), Dump{}}
	case Dumped:
		if s.state != SrcDumping {
			return nil
		}
		if e.Err != nil {
			return s.abortFile(now, e.Err)
		}
		s.state = SrcWriting
		if s.rec.Stop {
			return []SourceAction{WriteFile{}}
		}
		// The images are taken: the job runs on while they are written.
		return []SourceAction{Thaw{}, WriteFile{}}
	case Written:
		if s.state != SrcWriting {
			return nil
		}
		if e.Err != nil {
			return s.abortFile(now, fmt.Errorf("checkpoint file: %w", e.Err))
		}
		s.state = SrcSealing
		return []SourceAction{SealFile{}}
	case Sealed:
		if s.state != SrcSealing {
			return nil
		}
		if e.Err != nil {
			return s.abortFile(now, fmt.Errorf("checkpoint file: %w", e.Err))
		}
		s.state = SrcDelivering
		return []SourceAction{Deliver{}}
	case Delivered:
		if s.state != SrcDelivering {
			return nil
		}
		if e.Err != nil {
			return s.abortFile(now, fmt.Errorf("%w: %w", ErrNotDelivered, e.Err))
		}
		return s.commitFile(now)
	case CopyGone:
		if s.state != SrcCommitting || !s.rec.Stop || s.rec.Killed {
			return nil
		}
		s.rec.Killed = true
		s.state = SrcDone
		return append([]SourceAction{s.persist()}, s.noteHomeOK()...)
	}
	return nil
}

// abortFile decides "aborted" for a checkpoint that may have frozen the
// job and begun its file: persist, thaw, remove the file.
func (s *Source) abortFile(now time.Time, err error) []SourceAction {
	s.state, s.err = SrcAborted, err
	s.rec.Outcome, s.rec.Error, s.rec.DecidedAt = Aborted, err.Error(), now
	s.waitingHome = true
	return []SourceAction{s.persist(), Thaw{}, RemoveFile{}, NoteHome{OK: false, Error: err.Error()}}
}

// commitFile decides "committed" once the file is delivered: with Stop,
// persist, then kill the frozen job; else it runs already.
func (s *Source) commitFile(now time.Time) []SourceAction {
	s.rec.Outcome, s.rec.DecidedAt = Committed, now
	if s.rec.Stop {
		s.state = SrcCommitting
		return []SourceAction{s.persist(), Kill{}}
	}
	s.state = SrcDone
	return append([]SourceAction{s.persist()}, s.noteHomeOK()...)
}

// recoverCheckpoint is Recover for a checkpoint: undecided, it aborts
// (the file may be half written or not yet delivered); committed with
// Stop, the job is killed if it may still be there.
func (s *Source) recoverCheckpoint(now time.Time) []SourceAction {
	r := s.rec
	switch r.Outcome {
	case Pending:
		s.state = SrcDumping
		return s.abortFile(now, ErrRestarted)
	case Aborted:
		s.state, s.err = SrcAborted, errors.New(r.Error)
		s.finished = true
		acts := []SourceAction{Thaw{}, RemoveFile{}}
		if !r.Noted {
			s.waitingHome = true
			acts = append(acts, NoteHome{OK: false, Error: r.Error})
		}
		return acts
	}
	s.finished = true
	if r.Stop && !r.Killed {
		s.state = SrcCommitting
		return []SourceAction{Kill{}}
	}
	s.state = SrcDone
	if !r.Noted {
		return s.noteHomeOK()
	}
	return nil
}
