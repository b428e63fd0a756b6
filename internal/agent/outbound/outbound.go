// Package outbound is the source's side of live migration (MOSIX's
// preemptive migration, Kerrighed's process extraction, with CRIU): the
// driver that carries out what the source machine (migrate.Source)
// decides, for a job leaving this node for another and for a checkpoint,
// a run of the same machine whose destination is a sealed file. It also
// holds the entry points that start one (`roam migrate`, a move of the
// policies, a checkpoint), the source's answer to a destination that asks
// how a migration ended, and the job's home's taking of the notes a
// source sends it.
//
// It must not decide (package migrate does) nor keep state of its own
// beyond each run's: the job table, the migrations in flight, the ledger
// and the keeper are their owners', reached through their methods, and
// what it needs of the agent's other concerns comes in as funcs (Config).
// It never imports the agent.
package outbound

import (
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"roam/internal/agent/httpx"
	"roam/internal/agent/jobtable"
	"roam/internal/agent/keeper"
	"roam/internal/agent/members"
	"roam/internal/agent/pages"
	"roam/internal/agent/peer"
	"roam/internal/agent/phases"
	"roam/internal/agent/relay"
	"roam/internal/api"
	"roam/internal/ckpt"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/migrate"
)

// Moves is what the source's side needs of the migrations in flight
// (package moves' table): where a job that left went, and whether the
// ledger is due for pruning.
type Moves interface {
	jobtable.Moves
	PruneDue(now time.Time, every time.Duration) bool
}

// Config is what the source's driver is made of. The funcs are the
// agent's other concerns; each may be called from any goroutine, with no
// lock of this package's held.
type Config struct {
	// Self is this node's id.
	Self string
	// ImageDir is where a dump's images go.
	ImageDir string
	// AllUsers: root's CRIU can dump other users' jobs here.
	AllUsers bool
	Jobs     *jobtable.Table
	Moves    Moves
	// Store is the job table on disk, whose ledger has every decision
	// of the machine before it is acted on.
	Store   *job.Store
	Keeper  *keeper.Keeper
	Members *members.Table
	Peers   *peer.Client
	Pages   *pages.Streams
	Procs   job.Processes
	Ckpt    ckpt.Checkpointer
	Metrics phases.Metrics
	Log     *slog.Logger
	// Stop is closed when the agent stops; WG counts the runs Recover
	// starts, which the agent's Close waits for.
	Stop <-chan struct{}
	WG   *sync.WaitGroup

	// Record is a job's record at its home (this node or another).
	Record func(id string) (job.Record, error)
	// Draining says whether node drains, as this node knows.
	Draining func(node string) bool
	// Attained is a job's attained CPU time, which it carries along.
	Attained func(job.Local) float64
	// KickLoad has the load loop probe now, out of turn: a job left
	// this node.
	KickLoad func()
	// Event records a decision for `roam events`.
	Event func(api.Event)
	// DropCheckpoint asks node to drop job id's checkpoint older than
	// before, in the background.
	DropCheckpoint func(node, id string, before time.Time)
	// Leases are the node's fencing (package news): how old a job's lease
	// here is (migrate.Header.LeaseAge), and whether its fence holds it
	// stopped here, when it neither moves nor is saved until the fence
	// thaws it.
	Leases Leases
}

// Driver starts and drives the migrations and checkpoints that leave
// this node; each run has a goroutine of its own.
type Driver struct {
	self           string
	imageDir       string
	allUsers       bool
	jobs           *jobtable.Table
	moves          Moves
	store          *job.Store
	keeper         *keeper.Keeper
	members        *members.Table
	peers          *peer.Client
	pages          *pages.Streams
	procs          job.Processes
	ckpt           ckpt.Checkpointer
	metrics        phases.Metrics
	log            *slog.Logger
	stop           <-chan struct{}
	wg             *sync.WaitGroup
	record         func(id string) (job.Record, error)
	draining       func(node string) bool
	attained       func(job.Local) float64
	kickLoad       func()
	event          func(api.Event)
	dropCheckpoint func(node, id string, before time.Time)
	leases         Leases
}

// Leases is what the source needs of the node's fencing (news.Relay).
type Leases interface {
	LeaseAge(job.Local) time.Duration
	FenceHolds(id string) bool
	// DumpBegins and DumpEnds bracket a dump of a job here: a job that
	// dies by a signal in it, or just after it failed, died of it.
	DumpBegins(id string)
	DumpEnds(id string, err error)
	// FenceKilled says whether job id's fence killed it here.
	FenceKilled(id string) bool
}

// New is the source's driver of the node c describes.
func New(c Config) *Driver {
	return &Driver{self: c.Self, imageDir: c.ImageDir, allUsers: c.AllUsers, jobs: c.Jobs, moves: c.Moves, store: c.Store,
		keeper: c.Keeper, members: c.Members, peers: c.Peers, pages: c.Pages, procs: c.Procs, ckpt: c.Ckpt,
		metrics: c.Metrics, log: c.Log, stop: c.Stop, wg: c.WG, record: c.Record, draining: c.Draining,
		attained: c.Attained, kickLoad: c.KickLoad, event: c.Event, dropCheckpoint: c.DropCheckpoint, leases: c.Leases}
}

// Migrate is `roam migrate`: it moves a running job to another node, or
// hands it back to the automatic policies ("auto"). A caller may move
// only their own jobs, root any.
func (d *Driver) Migrate(c httpx.Caller, req api.MigrateRequest) (api.Migration, error) {
	rec, err := d.record(req.ID)
	if err != nil {
		return api.Migration{}, err
	}
	if !c.MayAct(rec.UID) {
		return api.Migration{}, errkind.New(peer.ErrPermission, "%s: permission denied", req.ID)
	}
	if req.Node == "auto" {
		if rec.Pin {
			return api.Migration{}, errkind.New(peer.ErrPinned, "%s: pinned by roam run --pin", rec.ID)
		}
		if rec.State == api.StateRunning {
			// Its current node holds it back from the policies; let go.
			if err := d.peers.Call(rec.Node, http.MethodPost, peer.Hold+"?id="+rec.ID, nil, nil); err != nil {
				return api.Migration{}, fmt.Errorf("node %s: %w", rec.Node, err)
			}
		}
		return api.Migration{}, retry(func() error { return d.noteHome(rec.Home, relay.Note{ID: rec.ID, Manual: new(bool)}) })
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
	if !d.members.Alive(to) {
		return api.Migration{}, errkind.New(peer.ErrNotFound, "node %s is not a live member of the cluster", to)
	}
	if d.draining(to) {
		return api.Migration{}, errkind.New(peer.ErrUnavailable, "node %s is draining: it takes no job (roam node resume ends it)", to)
	}
	out := peer.MigrateOutRequest{ID: rec.ID, To: to, Lazy: req.Lazy, Manual: true}
	var m api.Migration
	err = d.peers.CallWithin(peer.MigrateTimeout, rec.Node, http.MethodPost, peer.MigrateOut, out, &m)
	return m, err
}

// ---- the home node's record ----

// noteHome tells a job's home node; one try (the migration machine tries
// again).
func (d *Driver) noteHome(home string, n relay.Note) error {
	return d.peers.Call(home, http.MethodPost, peer.Note, n, nil)
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

// TakeNote is peer.Note, at the job's home: it updates the job's record.
// A migration's note may come twice (the source tries again until it
// hears back) and notes of two migrations may come in either order: each
// is kept once, and the record moves only to a newer one
// (migrate.ApplyNote).
func (d *Driver) TakeNote(n relay.Note) error {
	back, drop, err := d.jobs.TakeNote(n, time.Now())
	for _, e := range back {
		d.event(e)
	}
	if drop != nil {
		d.dropCheckpoint(drop.StoredOn, n.ID, n.Checkpoint.At) // not a newer one kept there since
	}
	return err
}

// ServeOutcome is peer.MigrateOutcome: this node's answer to a
// destination that asks how migration ?mid= ended, from the ledger,
// which has every decision before it is acted on.
func (d *Driver) ServeOutcome(w http.ResponseWriter, r *http.Request) {
	mid := r.URL.Query().Get("mid")
	if !migrate.ValidMID(mid) {
		httpx.WriteError(w, errkind.New(peer.ErrBadRequest, "migration id %q", mid))
		return
	}
	rec, found, err := d.store.Out(mid)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, peer.MigrateOutcomeAnswer{Outcome: string(migrate.Answer(rec, found))})
}
