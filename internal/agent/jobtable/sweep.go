package jobtable

// The job table's part of the sweeps (package sweep) and of the pending
// jobs: a sweep is its home records, so what the home needs of one is
// read from them under the lock; pending jobs are released (pending to
// starting, with their node) and ended before they start here, each a
// step under the lock written to the store before the table changes.

import (
	"fmt"
	"time"

	"roam/internal/agent/relay"
	"roam/internal/job"
	"roam/internal/sweep"
)

// ReleasePending turns pending jobs into starting ones on their nodes (by id),
// at now, and returns the records it changed: a job ended meanwhile
// (roam kill) is left out.
func (j *Table) ReleasePending(nodes map[string]string, now time.Time) ([]job.Record, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	next := map[string]*job.Record{}
	for id, node := range nodes {
		if r := j.home[id]; r != nil && r.State == job.StatePending {
			c := *r
			c.State, c.Node, c.Started = job.StateStarting, node, now
			next[id] = &c
		}
	}
	if err := j.putHome(next); err != nil {
		return nil, err
	}
	out := make([]job.Record, 0, len(next))
	for id, r := range next {
		out = append(out, *r)
		j.wakeReaders(id)
	}
	return out, nil
}

// Unrelease puts back to pending the released jobs that did not start
// (their nodes refused them, or did not answer: those that did start
// were killed).
func (j *Table) Unrelease(recs []job.Record) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	next := map[string]*job.Record{}
	for _, rec := range recs {
		if r := j.home[rec.ID]; r != nil && r.State == job.StateStarting {
			c := *r
			c.State, c.Node = job.StatePending, ""
			next[rec.ID] = &c
		}
	}
	return j.putHome(next)
}

// EndPending ends home jobs that are still pending, as a signal sig would
// have at once (exit status 128+sig), at now. It returns the records of
// the others, which started meanwhile (their node is to be signalled),
// and the ids it has no record of.
func (j *Table) EndPending(ids []string, sig int, now time.Time) (started []job.Record, unknown []string, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	next := map[string]*job.Record{}
	for _, id := range ids {
		r := j.home[id]
		switch {
		case r == nil:
			unknown = append(unknown, id)
		case next[id] != nil:
		case r.State == job.StatePending:
			c := *r
			code := 128 + sig
			c.State, c.ExitCode, c.Ended = job.StateFinished, &code, now
			c.Started = now
			c.EndReason = fmt.Sprintf("ended before it started (signal %d)", sig)
			next[id] = &c
		default:
			started = append(started, *r)
		}
	}
	if err := j.putHome(next); err != nil {
		return nil, nil, err
	}
	for id := range next {
		j.wakeReaders(id)
	}
	return started, unknown, nil
}

// SweepRecords copies the home records of sweep id, without their
// environments and with their argv cut (as PsView) unless env.
func (j *Table) SweepRecords(id string, env bool) []job.Record {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []job.Record
	for _, r := range j.home {
		if r.Sweep.ID == id {
			c := *r
			if !env {
				c.Env = nil
				c.Argv, _ = job.PSArgv(c.Argv)
			}
			out = append(out, c)
		}
	}
	return out
}

// KickRelease has the home look at its pending jobs out of turn: one of
// its jobs ended, a job here left its room, a load entry shows room.
// ReleaseKicked is what it waits on.
func (j *Table) KickRelease() {
	select {
	case j.release <- struct{}{}:
	default:
	}
}

func (j *Table) ReleaseKicked() <-chan struct{} { return j.release }

// kickIfSweep kicks the release of pending jobs when rec, which just
// ended, is of a sweep, or some jobs wait for room. mu held.
func (j *Table) kickIfSweep(rec *job.Record) {
	if (rec.Sweep.ID != "" || j.forRoom) && rec.Over() {
		j.KickRelease()
	}
}

// Files are where a home job's output goes besides its spool (roam run
// --output, --error), and whom to write them as.
type Files struct {
	UID, GID uint32
	Groups   []uint32
	Out, Err string // "" for none
	// Failed: writing one failed already (FileError): no more is tried.
	Failed bool
}

// FilesOf are the files of those of ids whose output goes to files.
func (j *Table) FilesOf(ids []string) map[string]Files {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out map[string]Files
	for _, id := range ids {
		r := j.home[id]
		if r == nil || (r.Sweep.Output == "" && r.Sweep.Error == "") {
			continue
		}
		if out == nil {
			out = map[string]Files{}
		}
		v := sweep.Values{Sweep: r.Sweep.ID, Job: r.ID, Index: r.Sweep.Index}
		f := Files{UID: r.UID, GID: r.GID, Groups: r.Groups, Failed: r.Sweep.FileError != ""}
		if r.Sweep.Output != "" {
			f.Out = sweep.Expand(r.Sweep.Output, r.Cwd, v)
		}
		if r.Sweep.Error != "" {
			f.Err = sweep.Expand(r.Sweep.Error, r.Cwd, v)
		}
		out[id] = f
	}
	return out
}

// SetFileError keeps why a home job's output could not go to its file,
// the first reason only.
func (j *Table) SetFileError(id, why string) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	r := j.home[id]
	if r == nil || r.Sweep.FileError != "" {
		return nil
	}
	c := *r
	c.Sweep.FileError = relay.LimitText(why)
	return j.putHome(map[string]*job.Record{id: &c})
}

// LoseUnconfirmed marks lost, at now, the home jobs still starting when
// the home starts: their node was asked to start them (or was about to
// be) and the home never had its answer. A job its node does run is
// running again at the node's first news (relay.Revive), as one that was
// lost with its node; one that never started ends lost, and its sweep
// with it, rather than starting for ever. It returns them.
func (j *Table) LoseUnconfirmed(now time.Time) ([]job.Record, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	next := map[string]*job.Record{}
	for id, r := range j.home {
		if r.State == job.StateStarting {
			c := *r
			c.State, c.LostAt = job.StateLost, now
			next[id] = &c
		}
	}
	if err := j.putHome(next); err != nil {
		return nil, err
	}
	out := make([]job.Record, 0, len(next))
	for _, r := range next {
		out = append(out, *r)
	}
	return out, nil
}
