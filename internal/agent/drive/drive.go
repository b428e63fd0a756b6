// Package drive is what the drivers of the two migration machines share
// (package outbound drives migrate.Source, package inbound migrate.Dest):
// the loop that carries out a machine's actions and steps it with the
// events that answer them, the ledger's writes that no action may
// overtake, and the ledger's pruning. It decides nothing (package
// migrate does), holds no state and no lock, and touches no job.
package drive

import (
	"log/slog"
	"time"

	"roam/internal/job"
	"roam/internal/migrate"
)

// PruneEvery is how often the migration ledger is pruned (its records
// are kept for minutes: migrate.Retention).
const PruneEvery = time.Minute

// Loop carries out acts in order with do, then steps the machine with
// each event an action answered (step) and carries out that step's
// actions in turn, until no event is left. halted is asked before each
// action: once it says so (the ledger could not be written before the
// agent stopped) nothing more is carried out and Loop returns false; the
// next start finishes the migration from what the ledger has.
//
// E and A are a machine's events and actions (migrate.SourceEvent and
// SourceAction, or DestEvent and DestAction); do says whether its action
// was answered by an event.
func Loop[E, A any](acts []A, step func(E) []A, do func(A) (E, bool), halted func() bool) bool {
	var q []E
	for {
		for _, act := range acts {
			if halted() {
				return false
			}
			if ev, ok := do(act); ok {
				q = append(q, ev)
			}
		}
		if len(q) == 0 {
			return true
		}
		acts, q = step(q[0]), q[1:]
	}
}

// Persist writes a ledger record, again and again until it is written:
// no action may follow a decision the ledger does not have. It gives up
// only when stop is closed (the agent stops: false); the machine then
// stops where it is, and the next start finishes it from what the ledger
// has. what names the record in the log.
func Persist(stop <-chan struct{}, log *slog.Logger, what string, write func() error) bool {
	for {
		err := write()
		if err == nil {
			return true
		}
		log.Error("migration ledger: cannot write; retrying", "record", what, "err", err)
		select {
		case <-stop:
			return false
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// PruneLedger forgets the ledger's records past their retention; it
// reads the whole ledger, so it is called at most once every PruneEvery
// (moves.Table.PruneDue).
func PruneLedger(st *job.Store) {
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
