package jobtable

// What each user's home records cost (job.Charge), which the records
// budget (limits.records_bytes_per_user) holds: a run past it is refused
// before any of its records is kept, and the agent's start takes a
// user's records only up to it, live ones first, one at a time.

import (
	"roam/internal/agent/peer"
	"roam/internal/errkind"
	"roam/internal/job"
)

// ledger is the records' charges. The table's lock is held for each of
// its methods.
type ledger struct {
	rec   map[string]int64       // home job id -> its record's charge
	sweep map[string]*sweepShare // sweep id -> its Args, charged once
	user  map[uint32]int64       // uid -> its records' charges
}

// sweepShare is a sweep's Args and how many of its records the table
// holds: the Args' charge goes with the last.
type sweepShare struct {
	args *job.Args
	refs int
}

func newLedger() ledger {
	return ledger{rec: map[string]int64{}, sweep: map[string]*sweepShare{}, user: map[uint32]int64{}}
}

// argsOf are the Args r's sweep shares (nil: none): the table's, those
// given (the store's, at start), or r's own for the first of its sweep;
// fresh says they are charged with r.
func (l *ledger) argsOf(r *job.Record, given *job.Args) (sh *job.Args, fresh bool) {
	if r.Sweep.ID == "" {
		return nil, false
	}
	if s := l.sweep[r.Sweep.ID]; s != nil {
		return s.args, false
	}
	if given == nil {
		given = &job.Args{Argv: r.Argv, Env: r.Env}
	}
	return given, true
}

// cost is what r would add to its user's charges, with its sweep's Args
// (given, or the table's or its own).
func (l *ledger) cost(r *job.Record, given *job.Args) (int64, *job.Args, bool) {
	sh, fresh := l.argsOf(r, given)
	n := job.Charge(r, sh)
	if fresh {
		n += sh.Charge()
	}
	return n, sh, fresh
}

// add charges r, which the table now holds, to its user.
func (l *ledger) add(r *job.Record, given *job.Args) {
	if _, ok := l.rec[r.ID]; ok {
		return
	}
	n, sh, fresh := l.cost(r, given)
	if fresh {
		l.sweep[r.Sweep.ID] = &sweepShare{args: sh}
	}
	if s := l.sweep[r.Sweep.ID]; s != nil && r.Sweep.ID != "" {
		s.refs++
	}
	l.user[r.UID] += n
	if fresh {
		n -= sh.Charge() // the sweep's, taken back with its last record
	}
	l.rec[r.ID] = n
}

// drop takes r's charge back, which the table no longer holds; its
// sweep's Args' with the last of the sweep's records.
func (l *ledger) drop(r *job.Record) {
	n, ok := l.rec[r.ID]
	if !ok {
		return
	}
	delete(l.rec, r.ID)
	if s := l.sweep[r.Sweep.ID]; s != nil && r.Sweep.ID != "" {
		if s.refs--; s.refs == 0 {
			n += s.args.Charge()
			delete(l.sweep, r.Sweep.ID)
		}
	}
	if l.user[r.UID] -= n; l.user[r.UID] <= 0 {
		delete(l.user, r.UID)
	}
}

// admit says whether recs fit their users' budgets with what the table
// holds: the refusal names the first user they do not fit.
func (l *ledger) admit(recs []job.Record, over func(uid uint32, have, more int64) error) error {
	more := map[uint32]int64{}
	fresh := map[string]*job.Args{} // sweeps whose Args recs bring
	for i := range recs {
		r := &recs[i]
		had := fresh[r.Sweep.ID]
		n, sh, isNew := l.cost(r, had)
		switch {
		case isNew && had != nil:
			n -= sh.Charge() // charged with the sweep's first record
		case isNew:
			fresh[r.Sweep.ID] = sh
		}
		more[r.UID] += n
	}
	for uid, m := range more {
		if err := over(uid, l.user[uid], m); err != nil {
			return errkind.New(peer.ErrLimit, "%v", err)
		}
	}
	return nil
}

// RecordsBytes is what uid's home records cost (job.Charge).
func (j *Table) RecordsBytes(uid uint32) int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.ledger.user[uid]
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
	n, _, _ := j.ledger.cost(&r, sh)
	if over(r.UID, j.ledger.user[r.UID], n) != nil {
		return false
	}
	j.home[r.ID] = &r
	j.ledger.add(&r, sh)
	return true
}
