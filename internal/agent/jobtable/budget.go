package jobtable

// What each user's home records cost (job.Ledger), which the records
// budget (limits.records_bytes_per_user) holds: a run past it is refused
// before any of its records is kept, and the agent's start takes a
// user's records only up to it, live ones first, one at a time.

import "roam/internal/job"

// RecordsBytes is what uid's home records cost (job.Charge).
func (j *Table) RecordsBytes(uid uint32) int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.ledger.User(uid)
}

// LoadHome puts a home record the store holds into the table, at the
// agent's start, with its sweep's Args (nil: none), unless it would pass
// its user's budget (over refuses): false then, and the table is as it
// was.
func (j *Table) LoadHome(r job.Record, sh *job.Args, over func(uid uint32, have, more int64) error) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.home[r.ID] != nil {
		return true
	}
	n, _, _ := j.ledger.Cost(&r, sh)
	if over(r.UID, j.ledger.User(r.UID), n) != nil {
		return false
	}
	j.home[r.ID] = &r
	j.ledger.Add(&r, sh)
	return true
}
