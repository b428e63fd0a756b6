package jobtable

// The job table's part of checkpoints: which jobs here are due for their
// periodic checkpoint, what a checkpoint keeps of a job's record, and the
// end of a job stopped once checkpointed.

import (
	"time"

	"roam/internal/agent/keeper"
	"roam/internal/migrate"
)

// CkptJob is what a checkpoint keeps of job id's home record, nil until
// asked of its home once (setCkptJob).
func (j *Table) CkptJob(id string) *migrate.CheckpointJob {
	j.mu.Lock()
	defer j.mu.Unlock()
	if lj := j.local[id]; lj != nil {
		return lj.CkptJob
	}
	return nil
}

func (j *Table) SetCkptJob(id string, cj *migrate.CheckpointJob) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if lj := j.local[id]; lj != nil {
		lj.CkptJob = cj
	}
}

// EndedHere notes why this node ends job id (its news says it to the home).
func (j *Table) EndedHere(id, why string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if lj := j.local[id]; lj != nil {
		lj.why = why
	}
}

// RootSignals notes that root sent signal sig to job id, running here:
// if it ends, its home is told root ended it.
func (j *Table) RootSignals(id string, sig int) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if lj := j.local[id]; lj != nil {
		lj.rootSignal = sig
	}
}

// CheckpointsDue lists the jobs here whose periodic checkpoint is due, in
// the order they are to be taken (keeper.Order).
func (j *Table) CheckpointsDue(now time.Time) []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var ds []keeper.DueJob
	for id, lj := range j.local {
		if lj.Migrating || lj.why != "" {
			continue
		}
		if late, ok := keeper.Due(lj.Rec.CheckpointEvery, lj.lastCkpt, lj.ArrivedAt, now); ok {
			ds = append(ds, keeper.DueJob{ID: id, UID: lj.Rec.UID, Late: late})
		}
	}
	return keeper.Order(ds)
}

// StartPeriodic notes that job id's periodic checkpoint begins now and
// returns its home, which keeps the file when the job runs elsewhere.
func (j *Table) StartPeriodic(id string, now time.Time) (home string, ok bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	lj := j.local[id]
	if lj == nil {
		return "", false
	}
	lj.lastCkpt = now
	return lj.Rec.Home, true
}
