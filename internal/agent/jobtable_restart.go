package agent

// The job table's part of restarts from a checkpoint: the uploads of
// `roam restart` in progress, the home's consent to a restart (reopen),
// which makes the record a new incarnation before any copy is restored,
// and the end of a restore, which keeps it or puts the record back.

import (
	"fmt"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/agent/relay"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/job"
)

// beginUpload marks uid as uploading a checkpoint, one at a time per
// user: each holds a file on root's disk until it is checked. It is false
// when uid has one in progress already; endUpload ends it.
func (j *jobs) beginUpload(uid uint32) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.uploading[uid] {
		return false
	}
	if j.uploading == nil {
		j.uploading = map[uint32]bool{}
	}
	j.uploading[uid] = true
	return true
}

func (j *jobs) endUpload(uid uint32) {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.uploading, uid)
}

// restartID is the id a restart of req takes at home self: its own when
// its record here is of the same job (same owner, same start) or none is
// and self is its home; "" when it needs a new one (another cluster's
// job, or another job of this id). had says a record of it is here. A job
// being restarted, or that runs on a node not declared dead, is refused.
func (j *jobs) restartID(req reopenRequest, self string) (id string, had bool, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	id = req.ID
	rec := j.home[id]
	if rec != nil && (rec.UID != req.Owner.UID || !rec.Started.Equal(req.Meta.Job.Started)) {
		return "", false, nil // another job of this id (another cluster's): a new id
	}
	if h, _ := homeOf(id); h != self {
		id = "" // another cluster's home: a new id here
	}
	switch {
	case rec != nil && j.restarting[id] != nil:
		return "", false, errkind.New(peer.ErrBadRequest, "job %s is being restarted already", req.ID)
	case rec != nil && stillRuns(*rec, req.Lost):
		return "", false, errkind.New(peer.ErrBadRequest, "job %s is still %s on node %s: it is not restarted while it runs (never two copies); roam kill it first", req.ID, rec.State, rec.Node)
	}
	return id, rec != nil, nil
}

// stillRuns says a record says its job runs, on a node other than lost
// (the node membership declared dead, for a home's own restart).
func stillRuns(r job.Record, lost string) bool {
	return (r.State == job.StateStarting || r.State == job.StateRunning) && (lost == "" || r.Node != lost)
}

// reopen is the home's consent to restart req as job id on target: the
// record (or a new one) becomes incarnation Inc+1 running there, its
// output cut back to the checkpoint's offsets, written before it changes
// in memory, and kept as it was before until the restore's end is known
// (reopenEnded). fresh: id is new, so no record may hold it; had: a
// record of the job was here when restartID looked.
func (j *jobs) reopen(req reopenRequest, id string, fresh, had bool, target, self string, now time.Time) (job.Record, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	cur := j.home[id]
	if cur != nil && (fresh || !had || cur.UID != req.Owner.UID || !cur.Started.Equal(req.Meta.Job.Started)) {
		// The id is another job's, maybe another user's: a new id that
		// a record holds (the job table's sequence behind its records),
		// or one a run took while the lock was let go. The checkpoint
		// is not restarted as that job.
		return job.Record{}, errkind.New(peer.ErrUnavailable, "job id %s, for a restart of job %s, is another job's", id, req.ID)
	}
	prev := &job.Record{} // a new record: taken back by removing it
	next := newRecordOf(req, id, self)
	if cur != nil {
		if j.restarting[id] != nil || stillRuns(*cur, req.Lost) {
			return job.Record{}, errkind.New(peer.ErrBadRequest, "job %s changed while it was being restarted", id)
		}
		c := *cur
		prev, next = &c, *cur
	}
	next = reopenedRecord(next, req, target, now)
	if err := j.spools.Cut(id, next.Inc, req.Meta.Out, req.Meta.Err); err != nil {
		return job.Record{}, fmt.Errorf("home spool of job %s: %w", id, err)
	}
	if err := j.store.PutRecords(next); err != nil {
		return job.Record{}, err
	}
	j.home[id] = &next
	if j.restarting == nil {
		j.restarting = map[string]*job.Record{}
	}
	j.restarting[id] = prev
	j.wakeReaders(id)
	return next, nil
}

// newRecordOf is the record a checkpoint makes of its job at a home that
// has none, under id.
func newRecordOf(req reopenRequest, id, self string) job.Record {
	m := req.Meta.Job
	group := m.Group
	if group == "" || id != req.ID {
		group = id
	}
	return job.Record{ID: id, UID: req.Owner.UID, GID: req.Owner.GID, Groups: req.Owner.Groups, User: m.User, Argv: m.Argv, Env: m.Env,
		Cwd: m.Cwd, Home: self, Pin: m.Pin, Started: m.Started, Group: group, CheckpointEvery: req.Every}
}

// reopenedRecord is r as a new incarnation running on target from req's
// checkpoint.
func reopenedRecord(r job.Record, req reopenRequest, target string, now time.Time) job.Record {
	r.Inc++
	r.State, r.Node, r.ExitCode, r.Ended, r.LostAt = job.StateRunning, target, nil, time.Time{}, time.Time{}
	r.EndReason, r.PinReason = "", ""
	r.Restarts = append(r.Restarts, api.Restart{Inc: r.Inc, At: now, Node: target, CheckpointAt: req.Meta.At, CheckpointNode: req.Meta.Node,
		Out: req.Meta.Out, Err: req.Meta.Err, Why: req.Why})
	if len(r.Restarts) > job.MaxMigrationLog {
		r.Restarts = r.Restarts[len(r.Restarts)-job.MaxMigrationLog:]
	}
	return r
}

// reopenEnded takes the end of a restore: a failed one puts the record
// back as it was before (when nothing changed it since); one that may
// have run (the call broke off) leaves the job lost until its first push
// says it runs.
func (j *jobs) reopenEnded(d reopenDone, now time.Time) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	prev := j.restarting[d.ID]
	rec := j.home[d.ID]
	if prev == nil || rec == nil || rec.Inc != d.Inc {
		return nil
	}
	delete(j.restarting, d.ID)
	switch {
	case d.OK:
		return nil
	case !d.Failed:
		c := *rec
		c.State, c.LostAt = job.StateLost, now
		return j.putHome(map[string]*job.Record{d.ID: &c})
	case prev.ID == "":
		if err := j.store.DeleteRecords([]job.Record{*rec}); err != nil {
			return err
		}
		delete(j.home, d.ID)
		return nil
	}
	back := *prev
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

// markLostOn marks job id lost, if its record still says it runs on
// node, and returns its owner when it did.
func (j *jobs) markLostOn(id, node string, now time.Time) (uid uint32, marked bool, err error) {
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

// beginRestore marks job id as being restored here, one restore of a job
// at a time; endRestore ends it.
func (j *jobs) beginRestore(id string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.restoring[id] {
		return false
	}
	if j.restoring == nil {
		j.restoring = map[string]bool{}
	}
	j.restoring[id] = true
	return true
}

func (j *jobs) endRestore(id string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	delete(j.restoring, id)
}
