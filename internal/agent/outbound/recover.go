package outbound

// What a restarted agent finishes of the migrations and checkpoints that
// left this node: every one its ledger holds that had not settled
// (migrate.Recover), and the ledger's retention (migrate.Expired).

import (
	"time"

	"roam/internal/agent/peer"
	"roam/internal/migrate"
)

// Recover rebuilds the machines of the outgoing migrations an earlier
// run left unfinished, and returns every outgoing record the ledger has
// (the incoming side's recovery reads them: inbound.Driver.Recover). The
// jobs they concern are claimed at once, before the push loop runs, so
// that a source copy being killed is never taken for a job that ended;
// the machines then run in the background, counted in Config.WG (their
// messages need the cluster's members, which memberlist has not found
// yet).
func (d *Driver) Recover(now time.Time) []migrate.Record {
	outs, err := d.store.Outs()
	if err != nil {
		d.log.Error("migration ledger", "err", err)
	}
	for _, r := range outs {
		if migrate.Expired(r, now) {
			_ = d.store.DeleteOut(r.MID)
			continue
		}
		s, acts := migrate.Recover(now, r)
		if len(acts) == 0 {
			continue
		}
		d.log.Info("finishing a migration an earlier run left", "mid", r.MID, "job", r.Job, "to", r.To, "outcome", r.Outcome, "state", s.State())
		o := &outMig{d: d, m: s, req: peer.MigrateOutRequest{ID: r.Job, To: r.To, Lazy: r.Lazy}, done: make(chan error, 1)}
		if r.Target == migrate.TargetFile {
			o.ck = &ckptRun{} // a checkpoint: its file goes, or its job
		}
		// A copy being killed is no job to push or move; an aborted
		// migration's copy is the job, and stays free.
		o.lj = d.jobs.Recovered(r.Job, r.PID, r.Outcome == migrate.Committed)
		d.wg.Add(1)
		go func() {
			defer d.wg.Done()
			o.carryOut(acts)
		}()
	}
	return outs
}
