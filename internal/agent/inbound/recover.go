package inbound

// What a restarted agent finishes of the migrations and restarts coming
// to this node: every one its ledger holds that had not settled
// (migrate.RecoverDest), and the ledger's retention (migrate.DestExpired).

import (
	"time"

	"roam/internal/migrate"
)

// Recover rebuilds the machines of the incoming migrations and restarts
// an earlier run left unfinished, which then run in the background,
// counted in Config.WG; outs are the outgoing ones its ledger has
// (outbound.Driver.Recover), which say when a job left this node again.
func (d *Driver) Recover(now time.Time, outs []migrate.Record) {
	// When each job last left this node: an incoming record older than
	// that is not the job's present.
	leftAgain := map[string]time.Time{}
	for _, r := range outs {
		// A checkpoint moves nothing: its job did not leave.
		if r.Target != migrate.TargetFile && r.Outcome != migrate.Aborted && r.Started.After(leftAgain[r.Job]) {
			leftAgain[r.Job] = r.Started
		}
	}
	ins, err := d.store.Ins()
	if err != nil {
		d.log.Error("migration ledger", "err", err)
	}
	runs := map[string]bool{} // the restarts finished now, which keep their file
	for _, r := range ins {
		if migrate.DestExpired(r, now) {
			_ = d.store.DeleteIn(r.MID)
			continue
		}
		if r.State == migrate.DstAborted && migrate.Rebuild(r).Settled() {
			continue // ended (a failed restart's home told); the record only answers late messages
		}
		if r.State == migrate.DstCommitted && (r.Resumed || !d.procs.Alive(r.PID, r.Tix) || leftAgain[r.Job].After(r.EndedAt)) {
			// Resumed already (its user may have stopped it since); or
			// the job has moved on since (its copy here is gone, or a
			// later migration from here took it). One adopted but not
			// resumed, by a run that died between the two, is resumed.
			continue
		}
		d.log.Info("finishing an incoming migration an earlier run left", "mid", r.MID, "job", r.Job, "from", r.From, "state", r.State)
		runs[r.MID] = r.Restart
		m, acts := migrate.RecoverDest(now, r)
		in := d.AdoptRecord(r, m)
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			in.mu.Lock()
			defer in.mu.Unlock()
			_ = d.carryOut(in, acts)
		}()
	}
	if err == nil {
		d.keeper.RemoveLeftRuns(runs)
	}
}
