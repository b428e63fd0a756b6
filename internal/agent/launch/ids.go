package launch

// A job's id is HOME.SEQ: its home node's id and a number from the home's
// job sequence, which the store keeps (job.Store.NextSeqs).

import (
	"fmt"
	"time"

	"roam/internal/api"
	"roam/internal/job"
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
	last, err := s.loadHome(now)
	if err != nil {
		return err
	}
	// A new id comes after every record's, even when the sequence fell
	// behind them (a job table put back from a copy, a record set aside
	// or removed past its user's budget).
	if err := st.BumpSeq(last); err != nil {
		return err
	}
	locals, err := st.Locals()
	if err != nil {
		return err
	}
	s.cfg.Jobs.Load(nil, locals, now)
	lost, err := s.cfg.Jobs.LoseUnconfirmed(now)
	if err != nil {
		return err
	}
	for _, r := range lost {
		uid := r.UID
		s.cfg.Event(api.Event{At: now, Kind: "lost", Job: r.ID, UID: &uid, From: r.Node,
			Why: "its home restarted before node " + r.Node + " confirmed its start; running again if that node runs it"})
	}
	s.cfg.Log.Info("job table loaded", "local_jobs", len(locals), "unconfirmed", len(lost))
	return nil
}

// loadHome puts the home records the store holds in the job table, one
// at a time, each user's live ones first, then its ended ones, up to its
// records budget: a store that holds more (written by an older roam, or
// before the budget was lowered) costs the agent no more than the
// budget. The records past it are removed from the store with their
// output, and said. It
// returns the highest job sequence number of this home's records.
func (s *Starter) loadHome(now time.Time) (uint64, error) {
	var last, kept uint64
	var removed []job.Record
	byUser := map[uint32]int{}
	for _, live := range []bool{true, false} {
		out, err := s.cfg.Store.EachRecord(live, func(r job.Record, sh *job.Args) bool {
			if h, seq, ok := migrate.JobSeq(r.ID); ok && h == s.cfg.Self {
				last = max(last, seq)
			}
			if !s.cfg.Jobs.LoadHome(r, sh, s.cfg.Limits.RecordsOver) {
				byUser[r.UID]++
				return false
			}
			kept++
			return true
		})
		if err != nil {
			return 0, err
		}
		removed = append(removed, out...)
	}
	if err := s.cfg.Store.DeleteRecords(removed); err != nil {
		return 0, err
	}
	for _, r := range removed {
		s.cfg.Spools.Remove(r.ID) // a live one's node hears it is gone, and ends it
	}
	for uid, n := range byUser {
		why := fmt.Sprintf("%d of its job records in the store passed the records budget of user %d (limits.records_bytes_per_user) at the agent's start: removed", n, uid)
		s.cfg.Log.Warn("job table: records past a user's budget removed", "uid", uid, "records", n)
		s.cfg.Event(api.Event{At: now, Kind: "records", UID: &uid, Why: why})
	}
	s.cfg.Log.Info("home records loaded", "home_jobs", kept, "removed", len(removed))
	return last, nil
}
