package launch

// A job's id is HOME.SEQ: its home node's id and a number from the home's
// job sequence, which the store keeps (job.Store.NextSeqs).

import (
	"fmt"
	"time"

	"roam/internal/api"
	"roam/internal/migrate"
)

// Reload puts in the job table, at start, what an earlier run left in the
// store, and moves the job sequence past every record's id.
func (s *Starter) Reload(now time.Time) error {
	st := s.cfg.Store
	// One bad value (a disk error, a bug of an older roam) must not keep
	// the agent, and every other job, from starting.
	bad, err := st.SetAsideCorrupt()
	if err != nil {
		return err
	}
	for _, b := range bad {
		s.cfg.Log.Error("job table: a record that does not decode was set aside", "bucket", b.Bucket, "key", b.Key, "err", b.Err)
		s.cfg.Event(api.Event{Kind: "corrupt", Job: b.Key, Why: fmt.Sprintf("its %s record in the job table does not decode (%s); set aside under corrupt/", b.Bucket, b.Err)})
	}
	recs, err := st.Records()
	if err != nil {
		return err
	}
	var last uint64
	for i := range recs {
		if h, seq, ok := migrate.JobSeq(recs[i].ID); ok && h == s.cfg.Self {
			last = max(last, seq)
		}
	}
	// A new id comes after every record's, even when the sequence fell
	// behind them (a job table put back from a copy, a record set aside).
	if err := st.BumpSeq(last); err != nil {
		return err
	}
	locals, err := st.Locals()
	if err != nil {
		return err
	}
	s.cfg.Jobs.Load(recs, locals, now)
	lost, err := s.cfg.Jobs.LoseUnconfirmed(now)
	if err != nil {
		return err
	}
	for _, r := range lost {
		uid := r.UID
		s.cfg.Event(api.Event{At: now, Kind: "lost", Job: r.ID, UID: &uid, From: r.Node,
			Why: "its home restarted before node " + r.Node + " confirmed its start; running again if that node runs it"})
	}
	s.cfg.Log.Info("job table loaded", "home_jobs", len(recs), "local_jobs", len(locals), "unconfirmed", len(lost))
	return nil
}
