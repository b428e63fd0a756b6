package jobtable

// The job table's part of restarts from a checkpoint: the home's consent
// to a run of a restart (reopen), which makes the record a new
// incarnation before any copy is restored, and the run's end: the commit (commitRestart), which keeps
// it, or a failure (reopenEnded), which puts the record back.

import (
	"fmt"
	"slices"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/agent/relay"
	"roam/internal/agent/reopen"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/migrate"
)

// ConsentFor is the consent this home gave run mid already (ok), or a
// refusal of a run it ended or that took a consent before: a run is
// consented once.
func (j *Table) ConsentFor(id, mid string) (reopen.Consent, bool, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, m := j.markOf(mid); m != nil {
		return m.Consent, true, nil
	}
	if rec := j.home[id]; j.endedRuns.Has(mid) || rec != nil && slices.ContainsFunc(rec.Restarts, func(r api.Restart) bool { return r.MID == mid }) {
		return reopen.Consent{}, false, errkind.New(peer.ErrBadRequest, "restart %s of job %s has ended", mid, id)
	}
	return reopen.Consent{}, false, nil
}

// RefuseRun records that this home refused run mid: the run ends at its
// refusal, and is never consented later (ConsentFor).
func (j *Table) RefuseRun(mid string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.endedRuns.Add(mid)
}

// RestartID is the id a restart of req takes at home self: its own when
// its record here is of the same job (same owner, same start); "" when
// it needs a new one (another job of this id, a home whose state was
// lost). had says a record of it is here. A job being restarted, or that
// runs on a node not declared dead, is refused; so is one whose record
// is gone (its checkpoints end with it), and one that root or a limit
// ended (reopen.Revivable).
func (j *Table) RestartID(req reopen.Request, self string) (id string, had bool, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	id = req.ID
	rec := j.home[id]
	if rec != nil && (rec.UID != req.Owner.UID || !rec.Started.Equal(req.Meta.Job.Started)) {
		return "", false, nil // another job of this id (another cluster's): a new id
	}
	if h, _ := migrate.JobHome(id); h != self {
		id = "" // another cluster's home: a new id here
	}
	switch {
	case rec != nil && j.restarting[id].Holds(req):
		return "", false, errkind.New(peer.ErrBadRequest, "job %s is being restarted already", req.ID)
	case rec == nil && id != "":
		return "", false, errkind.New(peer.ErrNotFound, "job %s has no record at its home %s (purged, or expired: limits.keep_finished): its checkpoints ended with it", req.ID, self)
	case rec != nil && reopen.StillRuns(*rec, req.Lost):
		return "", false, errkind.New(peer.ErrBadRequest, "job %s is still %s on node %s: it is not restarted while it runs (never two copies); roam kill it first", req.ID, rec.State, rec.Node)
	case rec != nil:
		if err := reopen.Revivable(*rec); err != nil {
			return "", false, err
		}
	}
	return id, rec != nil, nil
}

// Reopen is the home's consent to restart req, run req.MID, as job ans.ID
// on ans.Node: the record (or a new one) becomes incarnation Inc+1
// running there, its output cut back to the checkpoint's offsets,
// written before it changes in memory, and kept as it was before until
// the run's end is known (commitRestart, reopenEnded). fresh: the id is
// new, so no record may hold it; had: a record of the job was here when
// restartID looked. It returns the new record and ans completed.
func (j *Table) Reopen(req reopen.Request, ans reopen.Consent, fresh, had bool, now time.Time) (job.Record, reopen.Consent, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	id := ans.ID
	cur := j.home[id]
	if cur != nil && (fresh || !had || cur.UID != req.Owner.UID || !cur.Started.Equal(req.Meta.Job.Started)) {
		// The id is another job's, maybe another user's: a new id that
		// a record holds (the job table's sequence behind its records),
		// or one a run took while the lock was let go. The checkpoint
		// is not restarted as that job.
		return job.Record{}, ans, errkind.New(peer.ErrUnavailable, "job id %s, for a restart of job %s, is another job's", id, req.ID)
	}
	prev := &job.Record{} // a new record: taken back by removing it
	next := reopen.NewRecord(req, id, ans.Home)
	if cur != nil {
		if j.restarting[id].Holds(req) || reopen.StillRuns(*cur, req.Lost) {
			return job.Record{}, ans, errkind.New(peer.ErrBadRequest, "job %s changed while it was being restarted", id)
		}
		c := *cur
		prev, next = &c, *cur
	}
	next = reopen.Reopened(next, req, ans.Node, now)
	if err := j.spools.Cut(id, next.Inc, req.Meta.Out, req.Meta.Err); err != nil {
		return job.Record{}, ans, fmt.Errorf("home spool of job %s: %w", id, err)
	}
	if err := j.store.PutRecords(next); err != nil {
		return job.Record{}, ans, err
	}
	if cur != nil {
		j.ledger.Drop(cur)
	}
	j.home[id] = &next
	j.heard[ans.Node] = now // its copy's lease there starts later: fence.RestartAt counts from here
	j.ledger.Add(&next, nil)
	ans.Inc, ans.Moves = next.Inc, next.Migrations
	j.restarting[id] = &reopen.Mark{MID: req.MID, Lost: req.Lost, Prev: prev, Consent: ans, At: now}
	j.wakeReaders(id)
	return next, ans, nil
}

// ReopenEnded takes the end of a failed run (its copy discarded): the
// record goes back to what it was before (when nothing changed it
// since), and the run is never consented again. A run whose mark an
// earlier start of this agent held leaves its incarnation lost.
func (j *Table) ReopenEnded(d reopen.Failed, now time.Time) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.endRun(d, now)
}

// ExpireRuns ends the runs whose marks are older than reopen.RunLimit,
// as if each had told its failure, and returns them.
func (j *Table) ExpireRuns(now time.Time) ([]reopen.Failed, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []reopen.Failed
	for id, m := range j.restarting {
		if m.MID == "" || now.Sub(m.At) < reopen.RunLimit {
			continue
		}
		d := reopen.Failed{MID: m.MID, ID: id, Inc: m.Consent.Inc, Error: fmt.Sprintf("no word from its run on node %s for %v", m.Consent.Node, reopen.RunLimit)}
		if err := j.endRun(d, now); err != nil {
			return out, err
		}
		out = append(out, d)
	}
	return out, nil
}

// endRun is reopenEnded with mu held.
func (j *Table) endRun(d reopen.Failed, now time.Time) error {
	j.endedRuns.Add(d.MID)
	id, m := j.markOf(d.MID)
	if m == nil {
		rec := j.home[d.ID]
		if rec == nil || j.restarting[d.ID] != nil || !reopen.Current(rec, d.MID) || rec.State != job.StateRunning {
			return nil
		}
		c := *rec
		c.State, c.LostAt = job.StateLost, now
		return j.putHome(map[string]*job.Record{d.ID: &c})
	}
	d.ID = id
	rec := j.home[id]
	delete(j.restarting, id)
	if rec == nil {
		return nil
	}
	if m.Prev.ID == "" {
		if err := j.store.DeleteRecords([]job.Record{*rec}); err != nil {
			return err
		}
		j.ledger.Drop(rec)
		delete(j.home, d.ID)
		return nil
	}
	back := *m.Prev
	back.Restarts = append(back.Restarts, rec.Restarts[len(rec.Restarts)-1])
	back.Restarts[len(back.Restarts)-1].Why += " (failed: " + relay.LimitText(d.Error) + ")"
	if back.State == job.StateRunning && back.Node != "" {
		// A home's own restart of a job on a dead node: lost after all.
		back.State, back.LostAt = job.StateLost, now
	}
	if err := j.putHome(map[string]*job.Record{d.ID: &back}); err != nil {
		return err
	}
	j.wakeReaders(d.ID)
	return nil
}

// markOf is the mark run mid holds, and its job's id. mu held.
func (j *Table) markOf(mid string) (string, *reopen.Mark) {
	for id, m := range j.restarting {
		if mid != "" && m.MID == mid {
			return id, m
		}
	}
	return "", nil
}

// CommitRestart is the home's decision on run mid of job id, whose copy
// waits stopped: committed while the mark is mid's (the mark goes; the
// record, written at the consent, says the job runs there) and after
// (the record's incarnation is mid's: that survives a restart of this
// agent); otherwise aborted, for good.
func (j *Table) CommitRestart(id, mid string) migrate.Outcome {
	j.mu.Lock()
	defer j.mu.Unlock()
	if held, m := j.markOf(mid); m != nil {
		delete(j.restarting, held)
		return migrate.Committed
	}
	if rec := j.home[id]; rec != nil && j.restarting[id] == nil && !j.endedRuns.Has(mid) && reopen.Current(rec, mid) {
		return migrate.Committed
	}
	j.endedRuns.Add(mid)
	return migrate.Aborted
}

// AwaitRestart holds job id for this home's own restart of it from the
// dead node lost, until its target asks for the consent (reopen) or
// endAwait; false: another restart holds it.
func (j *Table) AwaitRestart(id, lost string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.restarting[id] != nil {
		return false
	}
	j.restarting[id] = &reopen.Mark{Lost: lost}
	return true
}

// EndAwait drops awaitRestart's hold, unless a run took it.
func (j *Table) EndAwait(id string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if m := j.restarting[id]; m != nil && m.MID == "" {
		delete(j.restarting, id)
	}
}

// MarkLostOn marks job id lost, if its record still says it runs on
// node, and returns its owner when it did.
func (j *Table) MarkLostOn(id, node string, now time.Time) (uid uint32, marked bool, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	rec := j.home[id]
	if rec == nil || rec.State != job.StateRunning || rec.Node != node {
		return 0, false, nil
	}
	c := *rec
	c.State, c.LostAt = job.StateLost, now
	if err := j.putHome(map[string]*job.Record{id: &c}); err != nil {
		return 0, false, err
	}
	j.wakeReaders(id)
	return c.UID, true, nil
}
