package migrate

import (
	"errors"
	"time"
)

// DestState is where a destination's migration stands.
type DestState string

const (
	DstNew       DestState = "new"       // nothing yet
	DstVerifying DestState = "verifying" // restart: the file's seal and META are checked
	DstConsent   DestState = "consent"   // restart: the home is asked to consent
	DstSinkOpen  DestState = "sink-open" // checked; a page sink waits for the dump (eager)
	DstReceiving DestState = "receiving" // the stream arrives
	DstRestoring DestState = "restoring" // CRIU restores the copy, stopped
	DstStopped   DestState = "stopped"   // "ready" sent; the stopped copy waits for the commit
	DstAsking    DestState = "asking"    // no commit within CommitWait: asking the source
	DstCommitted DestState = "committed" // the job is this node's (InRecord.Resumed: it runs)
	DstAborted   DestState = "aborted"   // discarded
)

// SinkWait is how long a page sink waits for its migration's stream.
const SinkWait = 60 * time.Second

// Errors the destination answers with.
var (
	ErrNotReady     = errors.New("no restored copy here yet")
	ErrDestAborted  = errors.New("migration aborted here")
	ErrDestCommited = errors.New("migration committed here; it cannot be aborted")
)

// Events of the destination machine.
type (
	// Offer: the source's check passed here (files reachable) and, for an
	// eager migration, a page sink is open.
	Offer struct {
		MID, Job, From string
	}
	// Stream: a migration stream's header arrived.
	Stream struct {
		MID, Job, From string
		Lazy, Streamed bool
		Header         []byte // kept in the record, opaque
	}
	// Received answers Receive: the archive is read.
	Received struct{ Err error }
	// Restored answers Restore: a stopped copy exists (PID, Tix), or not.
	Restored struct {
		PID int
		Tix uint64
		Err error
	}
	// CommitMsg: the source committed.
	CommitMsg struct{}
	// AbortMsg: the source aborted.
	AbortMsg struct{}
	// Answered answers Ask: the source's outcome, or Err when it could
	// not be asked.
	Answered struct {
		Outcome Outcome
		Err     error
	}
	// Resumed answers Resume: the copy runs. Kept in the record, so that
	// an agent restarted after the adoption but before the resume still
	// lets the copy run, and one restarted after it leaves the job alone
	// (its user may have stopped it since).
	Resumed struct{}
)

// Actions of the destination machine.
type (
	// PersistIn: store the record durably before the next action.
	PersistIn struct{ Record InRecord }
	// Receive: read the archive (and take the sink's pages); answer
	// Received.
	Receive struct{}
	// Restore: restore the copy, stopped; answer Restored.
	Restore struct{}
	// Reply: answer the request being handled (the stream, a commit, an
	// abort) with Err.
	Reply struct{ Err error }
	// Adopt: make the copy a job of this node (its local record), unless
	// it is one already (idempotent).
	Adopt struct{}
	// Resume: let the copy run (idempotent); answer Resumed.
	Resume struct{}
	// Discard: drop the sink, kill the copy if there is one, remove the
	// images and the spool (idempotent).
	Discard struct{}
	// Ask: ask the source how the migration ended; answer Answered.
	Ask struct{}
)

// Dest is the destination side of one migration.
type Dest struct {
	rec     InRecord
	opened  time.Time
	lastAsk time.Time
	asking  bool
}

// State is the machine's state.
func (d *Dest) State() DestState {
	if d.rec.State == "" {
		return DstNew
	}
	return d.rec.State
}

// Record is the machine's record.
func (d *Dest) Record() InRecord { return d.rec }

// Final says the migration has ended here.
func (d *Dest) Final() bool { return d.rec.State == DstCommitted || d.rec.State == DstAborted }

// Step takes one event at now and returns the actions to carry out.
func (d *Dest) Step(now time.Time, ev DestEvent) []DestAction {
	switch e := ev.(type) {
	case Restart:
		return d.restart(now, e)
	case Resumed:
		if d.rec.State != DstCommitted || d.rec.Resumed {
			return nil
		}
		d.rec.Resumed = true
		return []DestAction{PersistIn{d.rec}}
	}
	if d.rec.Restart {
		return d.restartStep(now, ev)
	}
	switch e := ev.(type) {
	case Offer:
		if d.State() != DstNew {
			return nil
		}
		d.rec = InRecord{MID: e.MID, Job: e.Job, From: e.From, State: DstSinkOpen, Started: now, Streamed: true}
		d.opened = now
		return []DestAction{Wake{now.Add(SinkWait)}}
	case Stream:
		return d.stream(now, e)
	case Received:
		switch {
		case d.rec.State == DstAborted:
			return []DestAction{Discard{}, Reply{ErrDestAborted}}
		case d.rec.State != DstReceiving:
			return nil
		case e.Err != nil:
			return d.fail(now, e.Err)
		}
		d.rec.State = DstRestoring
		return []DestAction{PersistIn{d.rec}, Restore{}}
	case Restored:
		switch {
		case d.rec.State == DstAborted:
			// Aborted while restoring: the copy goes.
			d.rec.PID, d.rec.Tix = e.PID, e.Tix
			return []DestAction{PersistIn{d.rec}, Discard{}, Reply{ErrDestAborted}}
		case d.rec.State != DstRestoring:
			return nil
		case e.Err != nil:
			return d.fail(now, e.Err)
		}
		d.rec.State, d.rec.PID, d.rec.Tix, d.rec.ReadyAt = DstStopped, e.PID, e.Tix, now
		return []DestAction{PersistIn{d.rec}, Reply{nil}, Wake{now.Add(CommitWait)}}
	case CommitMsg:
		switch d.State() {
		case DstStopped, DstAsking:
			return d.commit(now, true)
		case DstCommitted:
			return []DestAction{Reply{nil}} // a duplicate
		case DstAborted:
			return []DestAction{Reply{ErrDestAborted}}
		}
		return []DestAction{Reply{ErrNotReady}}
	case AbortMsg:
		switch d.State() {
		case DstNew:
			return []DestAction{Discard{}, Reply{nil}}
		case DstCommitted:
			return []DestAction{Reply{ErrDestCommited}}
		case DstAborted:
			return []DestAction{Reply{nil}}
		case DstReceiving, DstRestoring:
			// The stream's handler discards what it has when its step
			// comes back (Received or Restored in DstAborted).
			d.end(now, DstAborted)
			return []DestAction{PersistIn{d.rec}, Reply{nil}}
		}
		return append(d.abort(now), Reply{nil})
	case Answered:
		return d.answered(now, e)
	case Tick:
		return d.tick(now)
	}
	return nil
}

func (d *Dest) stream(now time.Time, e Stream) []DestAction {
	switch {
	case d.State() == DstNew && !e.Streamed:
	case d.State() == DstSinkOpen && e.Streamed && e.Job == d.rec.Job && e.From == d.rec.From:
	default:
		return []DestAction{Reply{ErrDestAborted}}
	}
	d.rec = InRecord{MID: e.MID, Job: e.Job, From: e.From, State: DstReceiving, Started: now, Lazy: e.Lazy, Streamed: e.Streamed, Header: e.Header}
	return []DestAction{PersistIn{d.rec}, Receive{}}
}

// fail ends a migration whose stream or restore failed here.
func (d *Dest) fail(now time.Time, err error) []DestAction {
	d.end(now, DstAborted)
	return []DestAction{PersistIn{d.rec}, Discard{}, Reply{err}}
}

func (d *Dest) commit(now time.Time, reply bool) []DestAction {
	d.end(now, DstCommitted)
	acts := []DestAction{PersistIn{d.rec}, Adopt{}, Resume{}}
	if reply {
		acts = append(acts, Reply{nil})
	}
	return acts
}

func (d *Dest) abort(now time.Time) []DestAction {
	d.end(now, DstAborted)
	return []DestAction{PersistIn{d.rec}, Discard{}}
}

func (d *Dest) end(now time.Time, st DestState) {
	d.rec.State, d.rec.EndedAt, d.asking = st, now, false
}

func (d *Dest) answered(now time.Time, e Answered) []DestAction {
	if d.rec.State != DstAsking || !d.asking {
		return nil
	}
	d.asking = false
	switch {
	case e.Err == nil && e.Outcome == Committed:
		return d.commit(now, false)
	case e.Err == nil && (e.Outcome == Aborted || e.Outcome == Unknown):
		return d.abort(now)
	}
	// Pending, or the source unreachable: keep the copy stopped, ask
	// again. Only the source's decision may end it.
	return []DestAction{Wake{d.lastAsk.Add(AskEvery)}}
}

func (d *Dest) tick(now time.Time) []DestAction {
	switch d.rec.State {
	case DstSinkOpen:
		if !now.Before(d.opened.Add(SinkWait)) {
			return d.abort(now)
		}
	case DstStopped:
		if !now.Before(d.rec.ReadyAt.Add(CommitWait)) {
			d.rec.State = DstAsking
			return d.ask(now)
		}
	case DstAsking:
		if !d.asking && !now.Before(d.lastAsk.Add(AskEvery)) {
			return d.ask(now)
		}
	}
	return nil
}

func (d *Dest) ask(now time.Time) []DestAction {
	d.asking, d.lastAsk = true, now
	return []DestAction{Ask{}}
}

// RecoverDest rebuilds a destination machine from its persisted record
// after the agent restarted, and returns what it must do to finish.
func RecoverDest(now time.Time, r InRecord) (*Dest, []DestAction) {
	d := &Dest{rec: r}
	if r.Restart {
		return d, d.recoverRestart(now)
	}
	switch r.State {
	case DstReceiving, DstRestoring, DstSinkOpen:
		// "Ready" was never sent, so the source has not committed and
		// never will: whatever was restored goes.
		return d, d.abort(now)
	case DstStopped, DstAsking:
		d.rec.State = DstAsking
		return d, d.ask(now)
	case DstCommitted:
		return d, d.resume()
	}
	return d, []DestAction{Discard{}}
}

// resume is what a recovered committed migration still has to do: adopt
// and resume its copy, unless the record says the copy was resumed.
func (d *Dest) resume() []DestAction {
	if d.rec.Resumed {
		return nil
	}
	return []DestAction{Adopt{}, Resume{}}
}

// Rebuild is the machine of a record, as it stands, with nothing to do:
// to answer a late or duplicated message about a migration that ended.
func Rebuild(r InRecord) *Dest { return &Dest{rec: r} }
