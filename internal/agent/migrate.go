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
	"slices"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/agent/relay"
	"roam/internal/api"
	"roam/internal/asuser"
	"roam/internal/errkind"
	"roam/internal/job"
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

// migrationState is the agent's migrations in flight, guarded by jobs.mu.
type migrationState struct {
	// in are the migrations coming to this node, by id.
	in map[string]*inMig
	// movedTo says where a job that left this node went, so a signal or
	// stdin sent here by a stale record still arrives.
	movedTo map[string]string
	// lazy dumps serving pages, by migration id.
	lazy map[string]*lazyDump
	// sinks: CRIU page servers taking streamed dumps' pages, by migration
	// id.
	sinks map[string]*pageSink
	// prunedAt is when the ledger was last pruned.
	prunedAt time.Time
	// checked are the files this node's check of each coming migration
	// found, by migration id, until its restore compares the restored
	// job's files with them (checkRestoredFiles); keepChecked bounds them.
	checked map[string]checkedFiles
}

// checkedFiles is what a migration's check found at each of the job's
// paths on this node, and when.
type checkedFiles struct {
	at    time.Time
	job   string
	files map[string]migrate.OpenFile
}

// maxCheckedFiles bounds what this node keeps from the checks of
// migrations still to come: their paths, and one for each check. The
// oldest checks go first; a migration whose check went finds none at its
// restore, and its files in shared directories are then refused (the job
// runs on at its source). A check is kept for checkedKeep at most: a
// migration that never came (its source gave up) leaves nothing for long.
const (
	maxCheckedFiles = 4 * migrate.MaxOpenFiles
	checkedKeep     = 10 * time.Minute
)

// keepChecked keeps what the check of migration mid (of job) found, for
// its restore. A second check of a migration it keeps one of is refused:
// it would replace the first's findings.
func (a *Agent) keepChecked(mid, job string, files map[string]migrate.OpenFile) error {
	a.jobs.mu.Lock()
	defer a.jobs.mu.Unlock()
	if _, ok := a.migr.checked[mid]; ok {
		return errkind.New(peer.ErrBadRequest, "migration %s is known on node %s already", mid, a.cfg.NodeID)
	}
	if a.migr.checked == nil {
		a.migr.checked = map[string]checkedFiles{}
	}
	now := time.Now()
	a.migr.checked[mid] = checkedFiles{at: now, job: job, files: files}
	for {
		n, oldest := 0, ""
		for m, c := range a.migr.checked {
			if now.Sub(c.at) > checkedKeep {
				delete(a.migr.checked, m)
				continue
			}
			n += 1 + len(c.files)
			if m != mid && (oldest == "" || c.at.Before(a.migr.checked[oldest].at)) {
				oldest = m
			}
		}
		if n <= maxCheckedFiles || oldest == "" {
			return nil
		}
		delete(a.migr.checked, oldest)
	}
}

// addChecked adds what a late check of migration mid (of job) found to
// what its first check found; it fails when there is no first check kept.
func (a *Agent) addChecked(mid, job string, files map[string]migrate.OpenFile) error {
	a.jobs.mu.Lock()
	defer a.jobs.mu.Unlock()
	c, ok := a.migr.checked[mid]
	if !ok || c.job != job {
		return errkind.New(peer.ErrBadRequest, "late check of migration %s of job %s: node %s has no check of it", mid, job, a.cfg.NodeID)
	}
	if len(c.files)+len(files) > 2*migrate.MaxOpenFiles {
		return errkind.New(peer.ErrBadRequest, "late check of migration %s of job %s: %d files more", mid, job, len(files))
	}
	for p, f := range files {
		c.files[p] = f
	}
	return nil
}

// takeChecked returns and forgets what the check of migration mid found,
// if it was of job (nil: nothing kept).
func (a *Agent) takeChecked(mid, job string) map[string]migrate.OpenFile {
	a.jobs.mu.Lock()
	defer a.jobs.mu.Unlock()
	c, ok := a.migr.checked[mid]
	delete(a.migr.checked, mid)
	if !ok || c.job != job {
		return nil
	}
	return c.files
}

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
		return api.Migration{}, retry(func() error { return a.noteHome(rec.Home, jobNote{ID: rec.ID, Manual: new(bool)}) })
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
	if a.isDraining(to) {
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

// jobNote is what a job's current node tells its home: a migration, the
// new node, a pin reason, the manual flag.
type jobNote struct {
	ID        string         `json:"id"`
	Node      string         `json:"node,omitempty"`
	Migration *api.Migration `json:"migration,omitempty"`
	PinReason string         `json:"pin_reason,omitempty"`
	Manual    *bool          `json:"manual,omitempty"`
	// Inc is the incarnation of the copy the note is of: a note of an
	// older one than the record's is dropped. Nil: unknown (a migration
	// finished after an agent restart, or an older roam).
	Inc *int `json:"inc,omitempty"`
	// Checkpoint is a checkpoint tried.
	Checkpoint *api.Checkpoint `json:"checkpoint,omitempty"`
}

// noteHome tells a job's home node; one try (the migration machine tries
// again).
func (a *Agent) noteHome(home string, n jobNote) error {
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
func (a *Agent) takeNote(n jobNote) error {
	var back []api.Event // recorded once jobs.mu is let go
	defer func() {
		for _, e := range back {
			a.event(e)
		}
	}()
	a.jobs.mu.Lock()
	defer a.jobs.mu.Unlock()
	rec := a.jobs.home[n.ID]
	if rec == nil {
		return errkind.New(peer.ErrNotFound, "unknown job %s", n.ID)
	}
	if n.Inc != nil && *n.Inc < rec.Inc {
		return nil // of a copy an older incarnation: it is being ended
	}
	if c := n.Checkpoint; c != nil {
		return a.takeCheckpointNote(rec, *c)
	}
	if m := n.Migration; m != nil && m.MID != "" {
		for _, old := range rec.MigrationLog {
			if old.MID == m.MID {
				return nil
			}
		}
	}
	switch {
	case n.Migration != nil && n.Migration.MID != "":
		m := n.Migration
		if m.OK && m.Seq > rec.Migrations {
			// A migration newer than any the home knows committed while
			// the home thought the job lost (its source was declared dead
			// mid-move): it runs at m.To. An older note says nothing of
			// where it runs now.
			if e, ok := relay.Revive(rec, m.To, time.Now()); ok {
				back = append(back, e)
			}
		}
		node, seq := migrate.ApplyNote(rec.Node, rec.Migrations, m.OK, m.To, m.Seq)
		if !rec.Over() {
			rec.Node = node
		}
		rec.Migrations = seq
		if m.OK {
			rec.PinReason = ""
		}
	case n.Node != "" && !rec.Over():
		rec.Node = n.Node
	}
	if n.Migration != nil {
		rec.MigrationLog = append(rec.MigrationLog, *n.Migration)
		if len(rec.MigrationLog) > job.MaxMigrationLog {
			rec.MigrationLog = rec.MigrationLog[len(rec.MigrationLog)-job.MaxMigrationLog:]
		}
	}
	if n.PinReason != "" {
		rec.PinReason = n.PinReason
	}
	if n.Manual != nil {
		rec.Manual = *n.Manual
	}
	return a.store.PutRecords(*rec)
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

// takeCheckpointNote keeps a checkpoint tried in the job's record; a
// periodic one kept on a node becomes the newest, and the one it replaces
// is dropped where it was kept. Called with jobs.mu held.
func (a *Agent) takeCheckpointNote(rec *job.Record, c api.Checkpoint) error {
	next := *rec
	next.Checkpoints = append(slices.Clone(rec.Checkpoints), c)
	if len(next.Checkpoints) > job.MaxMigrationLog {
		next.Checkpoints = next.Checkpoints[len(next.Checkpoints)-job.MaxMigrationLog:]
	}
	var drop *api.Checkpoint
	if c.OK && c.StoredOn != "" && (rec.Newest == nil || c.At.After(rec.Newest.At)) {
		if old := rec.Newest; old != nil && old.StoredOn != c.StoredOn {
			drop = old
		}
		next.Newest = &c
	}
	if err := a.store.PutRecords(next); err != nil {
		return err
	}
	*rec = next
	if drop != nil {
		a.dropCheckpointOn(drop.StoredOn, rec.ID, c.At) // not a newer one kept there since
	}
	return nil
}
