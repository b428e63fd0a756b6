package migrate

import (
	"errors"
	"time"
)

// A restart is a destination migration whose source is a sealed
// checkpoint file (checkpoint.go) on this node: the same machine, started
// with Restart, restores the job from the file as from a stream, but the
// job's home decides in place of a source. The home consents only while
// the job runs nowhere, and marks it restarting under the run's MID, as a
// new incarnation, until it is told the run's end.
//
//	Verifying  PersistIn(verifying); Verify: seal, META and header
//	Consent    PersistIn(consent); AskConsent: the home says the job runs
//	           nowhere and marks it restarting; a refusal aborts
//	Receiving  PersistIn(receiving); Receive: the images and the spool
//	           unpacked from the file
//	Restoring  PersistIn(restoring); Restore: the copy, stopped
//	Stopped    PersistIn(stopped); CommitAtHome: the home commits the
//	           restart (its record: the job runs here)
//	Committed  PersistIn(committed); Adopt; Resume; Reply
//
// A failure at any step (a bad file, a refusal, an unpack or restore
// error, an agent restart before the copy was stopped) aborts:
// PersistIn(aborted), Discard, TellHome (once the home may have
// consented: it drops its mark; retried until it has), Reply(err). A
// stopped copy whose commit got no answer asks again every AskEvery, and
// resumes only on the home's "committed": the home's decision, like a
// migration source's, is the only one.

// Events of a restart, besides the migration's (dest.go).
type (
	// Restart begins a restart of Job (home Home) from the checkpoint
	// file File here (the driver's name, kept in the record); MID names
	// the run for the home.
	Restart struct {
		MID, Job, Home, File string
	}
	// Verified answers Verify.
	Verified struct{ Err error }
	// ConsentAnswer answers AskConsent: the home consents to the job
	// running here again as Job (its id; "" unchanged), incarnation Inc,
	// Grant being its answer as it came (opaque, kept in the record); or
	// it refused (Refused, Err says why); or it did not answer (Err
	// alone: it may have consented).
	ConsentAnswer struct {
		Job     string
		Inc     int
		Grant   []byte
		Refused bool
		Err     error
	}
	// HomeDecided answers CommitAtHome: the home's outcome of the
	// restart, or Err when it could not be asked.
	HomeDecided struct {
		Outcome Outcome
		Err     error
	}
	// HomeTold answers TellHome.
	HomeTold struct{ Err error }
)

// Actions of a restart, besides the migration's (dest.go).
type (
	// Verify: check the file's seal, its META and its header; answer
	// Verified.
	Verify struct{}
	// AskConsent: ask the job's home to let the job run here from the
	// file: it must run nowhere and be restarted by no other run; the
	// home marks it restarting under the MID (idempotent by MID; a MID
	// it was told ended is refused); answer ConsentAnswer.
	AskConsent struct{}
	// CommitAtHome: ask the home to commit the restart: it answers
	// "committed" while its mark is this MID's (and after, for this
	// MID), else "aborted"; answer HomeDecided.
	CommitAtHome struct{}
	// TellHome: tell the home the restart failed, so it drops its mark
	// and refuses the MID from now on (idempotent); answer HomeTold.
	TellHome struct{}
)

// Errors a restart ends with.
var (
	ErrHomeAborted  = errors.New("the job's home ended the restart")
	ErrNotMigration = errors.New("a restart from a checkpoint here, not a migration")
)

// restart begins a restart run.
func (d *Dest) restart(now time.Time, e Restart) []DestAction {
	if d.State() != DstNew {
		return nil
	}
	d.rec = InRecord{MID: e.MID, Job: e.Job, Home: e.Home, File: e.File, Restart: true, State: DstVerifying, Started: now}
	return []DestAction{PersistIn{d.rec}, Verify{}}
}

// restartStep is Step for a restart.
func (d *Dest) restartStep(now time.Time, ev DestEvent) []DestAction {
	switch e := ev.(type) {
	case Verified:
		if d.rec.State != DstVerifying {
			return nil
		}
		if e.Err != nil {
			return d.failRestart(now, e.Err, false)
		}
		d.rec.State = DstConsent
		return []DestAction{PersistIn{d.rec}, AskConsent{}}
	case ConsentAnswer:
		if d.rec.State != DstConsent {
			return nil
		}
		if e.Err != nil {
			return d.failRestart(now, e.Err, !e.Refused)
		}
		if e.Job != "" {
			d.rec.Job = e.Job
		}
		d.rec.State, d.rec.Inc, d.rec.Grant = DstReceiving, e.Inc, e.Grant
		return []DestAction{PersistIn{d.rec}, Receive{}}
	case Received:
		if d.rec.State != DstReceiving {
			return nil
		}
		if e.Err != nil {
			return d.failRestart(now, e.Err, true)
		}
		d.rec.State = DstRestoring
		return []DestAction{PersistIn{d.rec}, Restore{}}
	case Restored:
		if d.rec.State != DstRestoring {
			return nil
		}
		if e.Err != nil {
			return d.failRestart(now, e.Err, true)
		}
		d.rec.State, d.rec.PID, d.rec.Tix, d.rec.ReadyAt = DstStopped, e.PID, e.Tix, now
		return []DestAction{PersistIn{d.rec}, d.commitAtHome(now)}
	case HomeDecided:
		return d.homeDecided(now, e)
	case HomeTold:
		if d.rec.State != DstAborted || !d.asking {
			return nil
		}
		d.asking = false
		if e.Err != nil {
			return []DestAction{Wake{now.Add(HomeRetry)}}
		}
		d.rec.Told = true
		return []DestAction{PersistIn{d.rec}}
	case Tick:
		return d.restartTick(now)
	case Stream, CommitMsg, AbortMsg:
		return []DestAction{Reply{ErrNotMigration}}
	}
	return nil
}

func (d *Dest) homeDecided(now time.Time, e HomeDecided) []DestAction {
	if d.rec.State != DstStopped || !d.asking {
		return nil
	}
	d.asking = false
	switch {
	case e.Err == nil && e.Outcome == Committed:
		d.end(now, DstCommitted)
		return []DestAction{PersistIn{d.rec}, Adopt{}, Resume{}, Reply{nil}}
	case e.Err == nil && (e.Outcome == Aborted || e.Outcome == Unknown):
		// The home has no mark of ours: nothing to tell it.
		d.end(now, DstAborted)
		d.rec.Told = true
		return []DestAction{PersistIn{d.rec}, Discard{}, Reply{ErrHomeAborted}}
	}
	// No answer: the copy stays stopped; only the home's decision ends it.
	return []DestAction{Wake{d.lastAsk.Add(AskEvery)}}
}

func (d *Dest) restartTick(now time.Time) []DestAction {
	switch {
	case d.asking:
	case d.rec.State == DstStopped && !now.Before(d.lastAsk.Add(AskEvery)):
		return []DestAction{d.commitAtHome(now)}
	case d.rec.State == DstAborted && !d.rec.Told && !now.Before(d.lastAsk.Add(HomeRetry)):
		return []DestAction{d.tellHome(now)}
	}
	return nil
}

func (d *Dest) commitAtHome(now time.Time) DestAction {
	d.asking, d.lastAsk = true, now
	return CommitAtHome{}
}

func (d *Dest) tellHome(now time.Time) DestAction {
	d.asking, d.lastAsk = true, now
	return TellHome{}
}

// failRestart ends a restart that failed here; tell: the home may hold a
// mark of it.
func (d *Dest) failRestart(now time.Time, err error, tell bool) []DestAction {
	acts := d.abortRestart(now, tell)
	return append(acts, Reply{err})
}

func (d *Dest) abortRestart(now time.Time, tell bool) []DestAction {
	d.end(now, DstAborted)
	d.rec.Told = !tell
	acts := []DestAction{PersistIn{d.rec}, Discard{}}
	if tell {
		acts = append(acts, d.tellHome(now))
	}
	return acts
}

// recoverRestart is RecoverDest for a restart: before its copy was
// stopped, it discards what it has (and tells the home, which may have
// consented); with a stopped copy, it asks the home to commit.
func (d *Dest) recoverRestart(now time.Time) []DestAction {
	switch d.rec.State {
	case DstVerifying:
		return d.abortRestart(now, false)
	case DstConsent, DstReceiving, DstRestoring:
		return d.abortRestart(now, true)
	case DstStopped, DstAsking:
		d.rec.State = DstStopped
		return []DestAction{d.commitAtHome(now)}
	case DstCommitted:
		return d.resume()
	}
	if !d.rec.Told {
		return []DestAction{Discard{}, d.tellHome(now)}
	}
	return []DestAction{Discard{}}
}

// Settled says nothing remains to be done here: the run ended, and a
// failed restart's home knows.
func (d *Dest) Settled() bool {
	return d.Final() && !(d.rec.Restart && d.rec.State == DstAborted && !d.rec.Told)
}
