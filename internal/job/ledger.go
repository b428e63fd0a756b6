package job

// What each user's home records cost (Charge), which the records budget
// (limits.records_bytes_per_user) holds: a sweep's Args once, with the
// first of its records, and back with the last.

// Ledger is what each user's home records cost, as the job table holds
// them. It is not safe for concurrent use: its owner's lock guards it.
type Ledger struct {
	rec   map[string]int64       // home job id -> its record's charge
	sweep map[string]*sweepShare // sweep id -> its Args, charged once
	user  map[uint32]int64       // uid -> its records' charges
}

// sweepShare is a sweep's Args and how many of its records the table
// holds: the Args' charge goes with the last.
type sweepShare struct {
	args *Args
	refs int
}

// NewLedger is an empty Ledger.
func NewLedger() Ledger {
	return Ledger{rec: map[string]int64{}, sweep: map[string]*sweepShare{}, user: map[uint32]int64{}}
}

// argsOf are the Args r's sweep shares (nil: none): the table's, those
// given (the store's, at start), or r's own for the first of its sweep;
// fresh says they are charged with r.
func (l *Ledger) argsOf(r *Record, given *Args) (sh *Args, fresh bool) {
	if r.Sweep.ID == "" {
		return nil, false
	}
	if s := l.sweep[r.Sweep.ID]; s != nil {
		return s.args, false
	}
	if given == nil {
		given = &Args{Argv: r.Argv, Env: r.Env}
	}
	return given, true
}

// Cost is what r would add to its user's charges, with its sweep's Args
// (given, or the table's or its own).
func (l *Ledger) Cost(r *Record, given *Args) (int64, *Args, bool) {
	sh, fresh := l.argsOf(r, given)
	n := Charge(r, sh)
	if fresh {
		n += sh.Charge()
	}
	return n, sh, fresh
}

// Add charges r, which the table now holds, to its user.
func (l *Ledger) Add(r *Record, given *Args) {
	if _, ok := l.rec[r.ID]; ok {
		return
	}
	n, sh, fresh := l.Cost(r, given)
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

// Drop takes r's charge back, which the table no longer holds; its
// sweep's Args' with the last of the sweep's records.
func (l *Ledger) Drop(r *Record) {
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

// Admit says whether recs fit their users' budgets with what the table
// holds: the refusal names the first user they do not fit.
func (l *Ledger) Admit(recs []Record, over func(uid uint32, have, more int64) error) error {
	more := map[uint32]int64{}
	fresh := map[string]*Args{} // sweeps whose Args recs bring
	for i := range recs {
		r := &recs[i]
		had := fresh[r.Sweep.ID]
		n, sh, isNew := l.Cost(r, had)
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
			return err
		}
	}
	return nil
}

// User is what uid's records cost.
func (l *Ledger) User(uid uint32) int64 { return l.user[uid] }
