package agent

// Live migration of a running job to another node (MOSIX's preemptive
// migration, Kerrighed's process extraction), with CRIU. The protocol is
// package migrate's two step machines; this file holds the agent's entry
// points and routes, migrate_source.go and migrate_dest.go their drivers,
// migrate_io.go the streams and the /proc reading, migrate_recover.go what
// a restarted agent finishes.

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"

	"roam/internal/agent/moves"
	"roam/internal/agent/peer"
	"roam/internal/agent/relay"
	"roam/internal/api"
	"roam/internal/asuser"
	"roam/internal/errkind"
	"roam/internal/migrate"
)

const (
	// stallTimeout ends a transfer that makes no progress this long (a
	// link down, a peer gone).
	stallTimeout = 5 * time.Second
	// restoreTimeout bounds the wait for the destination's "ready" once
	// all bytes are sent.
	restoreTimeout = 60 * time.Second
	// migrateTimeout bounds a whole migration asked of another node.
	migrateTimeout = 15 * time.Minute
)

// migrTable is the node's migrations in flight (package moves): the
// coming ones are the destination driver's inMigs, the lazy dumps the
// source driver's.
type migrTable = moves.Table[*inMig, *lazyDump]

// pruneEvery is how often the migration ledger is pruned (its records
// are kept for minutes: migrate.Retention).
const pruneEvery = time.Minute

// Migrate is `roam migrate`: it moves a running job to another node, or
// hands it back to the automatic policies ("auto").
func (a *Agent) Migrate(c Caller, req api.MigrateRequest) (api.Migration, error) {
	rec, err := a.record(req.ID)
	if err != nil {
		return api.Migration{}, err
	}
	if !canTouch(c, rec.UID) {
		return api.Migration{}, errkind.New(peer.ErrPermission, "%s: permission denied", req.ID)
	}
	if req.Node == "auto" {
		if rec.Pin {
			return api.Migration{}, errkind.New(peer.ErrPinned, "%s: pinned by roam run --pin", rec.ID)
		}
		if rec.State == api.StateRunning {
			// Its current node holds it back from the policies; let go.
			if err := a.peers.Call(rec.Node, http.MethodPost, peer.Hold+"?id="+rec.ID, nil, nil); err != nil {
				return api.Migration{}, fmt.Errorf("node %s: %w", rec.Node, err)
			}
		}
		return api.Migration{}, retry(func() error { return a.noteHome(rec.Home, relay.Note{ID: rec.ID, Manual: new(bool)}) })
	}
	to := req.Node
	if to == "home" {
		to = rec.Home
	}
	switch {
	case rec.State != api.StateRunning:
		return api.Migration{}, errkind.New(peer.ErrBadRequest, "%s: job is %s, not running", rec.ID, rec.State)
	case rec.Pin:
		return api.Migration{}, errkind.New(peer.ErrPinned, "%s: pinned by roam run --pin", rec.ID)
	case to == rec.Node:
		return api.Migration{}, errkind.New(peer.ErrBadRequest, "%s: already on node %s", rec.ID, to)
	}
	if !a.members.Alive(to) {
		return api.Migration{}, errkind.New(peer.ErrNotFound, "node %s is not a live member of the cluster", to)
	}
	if a.drain.Of(to) {
		return api.Migration{}, errkind.New(peer.ErrUnavailable, "node %s is draining: it takes no job (roam node resume ends it)", to)
	}
	out := migrateOutRequest{ID: rec.ID, To: to, Lazy: req.Lazy, Manual: true}
	var m api.Migration
	err = a.peers.CallWithin(migrateTimeout, rec.Node, http.MethodPost, peer.MigrateOut, out, &m)
	return m, err
}

type migrateOutRequest struct {
	ID string `json:"id"`
	To string `json:"to"`
	// Why is the policy's reason; empty for `roam migrate`.
	Why    string `json:"why,omitempty"`
	Lazy   bool   `json:"lazy,omitempty"`
	Manual bool   `json:"manual,omitempty"`
}

// migrateCheckRequest asks a destination whether it can take a job: its
// open files reachable there, no copy of it there already; and, eager, to
// open a page sink for the dump.
type migrateCheckRequest struct {
	MID  string `json:"mid"`
	From string `json:"from"`
	ID   string `json:"id"`
	// Files are the job's open files, mapped files and working
	// directories, which the restore reopens by path; Owner is whom the
	// destination opens them as first.
	Files []migrate.OpenFile `json:"opened"`
	Owner *asuser.Cred       `json:"owner"`
	Lazy  bool               `json:"lazy,omitempty"`
	// Late: the files are those the frozen job holds and the first check
	// of migration MID did not list (the job opened them since); the
	// destination checks them as the first ones and adds them to what its
	// restore compares the restored job's files with.
	Late bool `json:"late,omitempty"`
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

func newMID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// ---- the home node's record ----

// noteHome tells a job's home node; one try (the migration machine tries
// again).
func (a *Agent) noteHome(home string, n relay.Note) error {
	return a.peers.Call(home, http.MethodPost, peer.Note, n, nil)
}

// retry tries f three times, 200 ms apart, and returns its last error.
func retry(f func() error) error {
	err := f()
	for try := 1; try < 3 && err != nil; try++ {
		time.Sleep(200 * time.Millisecond)
		err = f()
	}
	return err
}

// takeNote updates a home record. A migration's note may come twice (the
// source tries again until it hears back) and notes of two migrations may
// come in either order: each is kept once, and the record moves only to
// a newer one (migrate.ApplyNote).
func (a *Agent) takeNote(n relay.Note) error {
	back, drop, err := a.jobs.TakeNote(n, time.Now())
	for _, e := range back {
		a.event(e)
	}
	if drop != nil {
		a.dropCheckpointOn(drop.StoredOn, n.ID, n.Checkpoint.At) // not a newer one kept there since
	}
	return err
}

// outcome is this node's answer to a destination that asks how migration
// mid ended: from the ledger, which has every decision before it is acted on.
func (a *Agent) outcome(mid string) (migrate.Outcome, error) {
	if !migrate.ValidMID(mid) {
		return "", errkind.New(peer.ErrBadRequest, "migration id %q", mid)
	}
	r, found, err := a.store.Out(mid)
	if err != nil {
		return "", err
	}
	return migrate.Answer(r, found), nil
}
