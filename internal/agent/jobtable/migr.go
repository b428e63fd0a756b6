package jobtable

// The job table's part in a migration: what the migration drivers do to
// the jobs running here, each one step under jobs.mu. The migrations' own
// state is package moves' (a.migr), whose lock ranks below jobs.mu: a
// job's leaving and arriving take it inside, so that the job is in the
// table or recorded as gone elsewhere at every moment.

import (
	"time"

	"roam/internal/agent/peer"
	"roam/internal/agent/relay"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/job"
)

// Moves is where the migrations in flight are kept (package moves' table):
// what a job's leaving and arriving record there, under the table's lock.
type Moves interface {
	Left(job, to string)
	Back(job string)
	Arriving(job, mid string) bool
	MovedTo(job string) string
}

// Claim marks local job id as migrating, so only one migration (or
// checkpoint) moves it at a time and the push loop leaves it alone
// meanwhile, and returns it with a copy of its record. lj is nil when the
// job does not run here; busy says a migration has it already (nothing
// is marked then).
func (j *Table) Claim(id string) (lj *Local, rec job.Local, busy bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	lj = j.local[id]
	if lj == nil || lj.Migrating {
		return nil, job.Local{}, lj != nil
	}
	lj.Migrating = true
	return lj, lj.Rec, false
}

// Release lets local job id, if it still runs here as pid, go back to
// the push loop and the policies; saved: into a file its owner holds
// (job.Local.Checkpointed, kept before its lease counts on it).
func (j *Table) Release(id string, pid int, saved bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if lj := j.local[id]; lj != nil && lj.Rec.PID == pid {
		lj.Migrating = false
		if saved && !lj.Rec.Checkpointed {
			lj.Rec.Checkpointed = true
			_ = j.store.PutLocals(lj.Rec)
		}
	}
}

// MovingJob is what a migration carries of a local job: its record and
// what its home has of its output, and whether it takes stdin.
type MovingJob struct {
	Rec            job.Local
	AckOut, AckErr int64
	Stdin          bool
}

// Moving is a copy of what a migration carries of local job lj.
func (j *Table) Moving(lj *Local) MovingJob {
	j.mu.Lock()
	defer j.mu.Unlock()
	return MovingJob{Rec: lj.Rec, AckOut: lj.AckOut, AckErr: lj.AckErr, Stdin: lj.Stdin != nil}
}

// Leave takes job id, if it runs here as pid, out of the table, and
// records that it went to node to; it returns the job taken out (nil:
// none). One step under jobs.mu, with the record of where it went taken
// inside: a signal or stdin sent here (control.Jobs.Settled) finds the job here
// or where it went, never neither, and no arrival between the two steps
// (adopt, a restart's Adopt) has where it went recorded after it came back.
func (j *Table) Leave(id string, pid int, to string, m Moves) *Local {
	j.mu.Lock()
	defer j.mu.Unlock()
	m.Left(id, to)
	lj := j.local[id]
	if lj == nil || lj.Rec.PID != pid {
		return nil
	}
	delete(j.local, id)
	return lj
}

// Adopt makes lj, a job restored here by a migration, a job of this node,
// unless it is one as that pid already (the Adopt action may be carried
// out twice), and forgets where the job went when it last left. One step
// under jobs.mu, for the reason leave gives.
func (j *Table) Adopt(lj *Local, m Moves) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if old := j.local[lj.Rec.ID]; old == nil || old.Rec.PID != lj.Rec.PID {
		j.local[lj.Rec.ID] = lj
	}
	delete(j.reserved, lj.Rec.ID) // its request counts as a local job's now
	m.Back(lj.Rec.ID)
}

// HereOrComing says whether job id runs here, or a migration of it other
// than mid is coming here. One look under jobs.mu: an arriving job is
// adopted (adopt) before its migration is forgotten, so it is seen as
// one or the other at every moment.
func (j *Table) HereOrComing(id, mid string, m Moves) (here, coming bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.local[id] != nil {
		return true, false
	}
	return false, m.Arriving(id, mid)
}

// Recovered is local job id, if it runs here as pid, for a migration an
// earlier run of the agent left (nil: none); a copy being killed
// (committed: the job runs at the destination) is marked as migrating,
// no job to push or move.
func (j *Table) Recovered(id string, pid int, committed bool) *Local {
	j.mu.Lock()
	defer j.mu.Unlock()
	lj := j.local[id]
	if lj == nil || lj.Rec.PID != pid {
		return nil
	}
	if committed {
		lj.Migrating = true
	}
	return lj
}

// TakeNote takes note n, from a job's current node, into its home record
// (relay.Noted): durable first, then in memory, as one step under jobs.mu (two
// notes of one job may come at once). It returns the events the note
// makes and the checkpoint kept elsewhere that a newer one replaces.
func (j *Table) TakeNote(n relay.Note, now time.Time) ([]api.Event, *api.Checkpoint, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	rec := j.home[n.ID]
	if rec == nil {
		return nil, nil, errkind.New(peer.ErrNotFound, "unknown job %s", n.ID)
	}
	next, keep, back, drop := relay.Noted(*rec, n, now)
	if !keep {
		return nil, nil, nil
	}
	if err := j.putHome(map[string]*job.Record{n.ID: &next}); err != nil {
		return nil, nil, err
	}
	j.heard[next.Node] = now // a copy moved there holds a lease no newer: fence.RestartAt counts from here
	return back, drop, nil
}

// WhereIs is job id's record when it runs here (busy: a migration is
// moving it), or the node it went to from here: one look, as a job's
// leaving records where it went in the same step (leave).
func (j *Table) WhereIs(id string, m Moves) (l job.Local, here, busy bool, movedTo string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if lj := j.local[id]; lj != nil {
		return lj.Rec, true, lj.Migrating, ""
	}
	return job.Local{}, false, false, m.MovedTo(id)
}
