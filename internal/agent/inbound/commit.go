package inbound

// The destination's side of the source's decision: its commit (told how
// old the job's lease was on the source then) or its abort.

import (
	"net/http"
	"strconv"
	"time"

	"roam/internal/agent/httpx"
	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/migrate"
)

// ServeCommit is peer.MigrateCommit: the source ended its copy of
// migration ?mid=, and this node's resumes; the answer has the steps it
// took to. ?lease_age= is how old the job's lease on the source was as
// it committed: the copy's lease here counts from then (adoptIn).
func (d *Driver) ServeCommit(w http.ResponseWriter, r *http.Request) {
	var leased time.Time
	if a := r.URL.Query().Get(peer.CommitLeaseAge); a != "" {
		age, err := strconv.ParseInt(a, 10, 64)
		if err != nil || age < 0 || time.Duration(age) > migrate.MaxLeaseAge {
			httpx.WriteError(w, errkind.New(peer.ErrBadRequest, "commit: lease age %.40q", a))
			return
		}
		leased = time.Now().Add(-time.Duration(age))
	}
	ph, err := d.stepIn(r.URL.Query().Get("mid"), migrate.CommitMsg{}, leased)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, peer.MigrateCommitted{Phases: ph})
}

// Abort is peer.MigrateAbort: the source of migration mid runs its copy
// on, and this node discards whatever it holds of the migration.
func (d *Driver) Abort(mid string) error {
	_, err := d.stepIn(mid, migrate.AbortMsg{}, time.Time{})
	return err
}

// stepIn brings a commit or an abort to migration mid's machine; a
// migration this node no longer holds in memory is rebuilt from the ledger.
func (d *Driver) stepIn(mid string, ev migrate.DestEvent, leased time.Time) ([]api.Phase, error) {
	if !migrate.ValidMID(mid) {
		return nil, errkind.New(peer.ErrBadRequest, "migration id %q", mid)
	}
	in, ok := d.moves.Arrival(mid)
	if !ok {
		r, found, err := d.store.In(mid)
		if err != nil {
			return nil, err
		}
		if !found {
			if _, abort := ev.(migrate.AbortMsg); abort {
				d.moves.DropSink(mid)
				d.moves.TakeChecked(mid, "")
				d.held.drop(mid)
				return nil, nil
			}
			return nil, errkind.New(peer.ErrNotFound, "no migration %s on node %s", mid, d.self)
		}
		in = d.AdoptRecord(r, migrate.Rebuild(r))
	}
	if !leased.IsZero() {
		in.mu.Lock()
		in.leased = leased
		in.mu.Unlock()
	}
	return d.step(in, ev)
}
