package jobtable

// Copies of the table for whoever only looks at it (the agent's tests
// check what its steps did with them), a look at its lock for the tests
// that check no step holds it across a slow read, and the few setters
// that put the table in a state its own steps do not reach in a test,
// each saying which.

import (
	"os"

	"roam/internal/agent/reopen"
	"roam/internal/job"
	"roam/internal/lockorder"
)

// HasLocal says job id runs here as pid.
func (j *Table) HasLocal(id string, pid int) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	lj := j.local[id]
	return lj != nil && lj.Rec.PID == pid
}

// IsLocal says whether job id is in the table as running here (or
// ended here, its home not told yet).
func (j *Table) IsLocal(id string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.local[id] != nil
}

// LocalRec is a copy of the record of job id when it runs here.
func (j *Table) LocalRec(id string) (job.Local, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if lj := j.local[id]; lj != nil {
		return lj.Rec, true
	}
	return job.Local{}, false
}

// Homes copies the records of the jobs whose home is this node, by id.
func (j *Table) Homes() map[string]job.Record {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make(map[string]job.Record, len(j.home))
	for id, r := range j.home {
		out[id] = *r
	}
	return out
}

// LockFree says whether the table's lock is free at this moment: taken
// and let go at once, or not taken when another goroutine holds it.
func (j *Table) LockFree() bool {
	if !j.mu.TryLock() {
		return false
	}
	j.mu.Unlock()
	return true
}

// LockHeldHere says whether the calling goroutine holds the table's lock;
// only the lock-order check (the lockcheck tag) knows, false without it.
func (j *Table) LockHeldHere() bool { return lockorder.HeldHere(&j.mu) }

// Seed puts home records and local jobs in the table in memory alone,
// over any of the same ids, none in the store, and with nothing known of
// the local jobs beyond their records (their homes' acknowledgements at
// zero, no arrival time, no stdin). The in-process fuzz harness starts
// each input from a table so seeded, its store holding none of it; the
// agent itself fills the table from the store (Load) and by its steps.
func (j *Table) Seed(recs []job.Record, locals []job.Local) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, r := range recs {
		if cur := j.home[r.ID]; cur != nil {
			j.ledger.Drop(cur)
		}
		j.home[r.ID] = &r
		j.ledger.Add(&r, nil)
	}
	for _, l := range locals {
		j.local[l.ID] = &Local{Rec: l}
	}
}

// SetStdin makes f the pipe that job id, running here, has its stdin
// written to, and says whether it runs here. A job gets its pipe when it
// starts (AddLocals); the agent's tests give one to a job their fake node
// started without, to read what the agent writes to it.
func (j *Table) SetStdin(id string, f *os.File) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	lj := j.local[id]
	if lj != nil {
		lj.Stdin = f
	}
	return lj != nil
}

// ForgetRuns forgets the restarts this home consented to and the runs it
// ended: what the table keeps of them in memory alone, and what an agent
// that restarts has lost, deciding a run's commit by the record alone.
// The agent's tests of that decision after a restart of the home use it.
func (j *Table) ForgetRuns() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.restarting, j.endedRuns = map[string]*reopen.Mark{}, reopen.Ended{}
}
