package agent

// What a restarted agent finishes: every migration its ledger holds that
// had not settled, on either side (migrate.Recover, migrate.RecoverDest),
// and the ledger's retention (migrate.Expired, migrate.DestExpired).

import (
	"time"

	"roam/internal/job"
	"roam/internal/migrate"
)

// recoverMigrations rebuilds the machines of the migrations an earlier
// run left unfinished. The jobs they concern are claimed at once, before
// the push loop runs, so that a source copy being killed is never taken
// for a job that ended; the machines then run in the background (their
// messages need the cluster's members, which memberlist has not found yet).
func (a *Agent) recoverMigrations() {
	now := time.Now()
	outs, err := a.store.Outs()
	if err != nil {
		a.log.Error("migration ledger", "err", err)
	}
	for _, r := range outs {
		if migrate.Expired(r, now) {
			_ = a.store.DeleteOut(r.MID)
			continue
		}
		s, acts := migrate.Recover(now, r)
		if len(acts) == 0 {
			continue
		}
		a.log.Info("finishing a migration an earlier run left", "mid", r.MID, "job", r.Job, "to", r.To, "outcome", r.Outcome, "state", s.State())
		o := &outMig{a: a, m: s, req: migrateOutRequest{ID: r.Job, To: r.To, Lazy: r.Lazy}, done: make(chan error, 1)}
		if r.Target == migrate.TargetFile {
			o.ck = &ckptRun{} // a checkpoint: its file goes, or its job
		}
		// A copy being killed is no job to push or move; an aborted
		// migration's copy is the job, and stays free.
		o.lj = a.jobs.Recovered(r.Job, r.PID, r.Outcome == migrate.Committed)
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			o.carryOut(acts)
		}()
	}
	a.recoverIns(now, outs)
}

// recoverIns rebuilds the machines of the incoming migrations an earlier
// run left unfinished; outs are the outgoing ones its ledger has.
func (a *Agent) recoverIns(now time.Time, outs []migrate.Record) {
	// When each job last left this node: an incoming record older than
	// that is not the job's present.
	leftAgain := map[string]time.Time{}
	for _, r := range outs {
		// A checkpoint moves nothing: its job did not leave.
		if r.Target != migrate.TargetFile && r.Outcome != migrate.Aborted && r.Started.After(leftAgain[r.Job]) {
			leftAgain[r.Job] = r.Started
		}
	}
	ins, err := a.store.Ins()
	if err != nil {
		a.log.Error("migration ledger", "err", err)
	}
	runs := map[string]bool{} // the restarts finished now, which keep their file
	for _, r := range ins {
		if migrate.DestExpired(r, now) {
			_ = a.store.DeleteIn(r.MID)
			continue
		}
		if r.State == migrate.DstAborted && migrate.Rebuild(r).Settled() {
			continue // ended (a failed restart's home told); the record only answers late messages
		}
		if r.State == migrate.DstCommitted && (a.jobs.HasLocal(r.Job, r.PID) || !a.procs.Alive(r.PID, r.Tix) || leftAgain[r.Job].After(r.EndedAt)) {
			// Adopted already; or the job has moved on since (its copy
			// here is gone, or a later migration from here took it).
			continue
		}
		a.log.Info("finishing an incoming migration an earlier run left", "mid", r.MID, "job", r.Job, "from", r.From, "state", r.State)
		runs[r.MID] = r.Restart
		d, acts := migrate.RecoverDest(now, r)
		in := a.adoptRecord(r, d)
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			in.mu.Lock()
			defer in.mu.Unlock()
			_ = a.carryOutIn(in, acts)
		}()
	}
	if err == nil {
		a.keeper.RemoveLeftRuns(runs)
	}
}

// pruneLedger forgets the ledger's records past their retention; it
// reads the whole ledger, so it is called at most once every pruneEvery
// (moves.Table.PruneDue).
func pruneLedger(st *job.Store) {
	now := time.Now()
	if outs, err := st.Outs(); err == nil {
		for _, r := range outs {
			if migrate.Expired(r, now) {
				_ = st.DeleteOut(r.MID)
			}
		}
	}
	if ins, err := st.Ins(); err == nil {
		for _, r := range ins {
			if migrate.DestExpired(r, now) {
				_ = st.DeleteIn(r.MID)
			}
		}
	}
}

// persist writes a ledger record, again and again until it is written:
// no action may follow a decision the ledger does not have. It gives up
// only when the agent stops (false); the machine then stops where it is,
// and the next start finishes it from what the ledger has.
func (a *Agent) persist(what string, write func() error) bool {
	for {
		err := write()
		if err == nil {
			return true
		}
		a.log.Error("migration ledger: cannot write; retrying", "record", what, "err", err)
		select {
		case <-a.stop:
			return false
		case <-time.After(500 * time.Millisecond):
		}
	}
}
