// Package inbound is the destination's side of live migration: the
// driver that carries out what the destination machine (migrate.Dest)
// decides, for a job coming to this node from another and for a restart,
// a run of the same machine whose source is a sealed checkpoint file. It
// answers the source's check, takes its stream and restores the job
// stopped, resumes it on the commit or discards it on an abort, asks the
// source how a migration ended when it did not hear, and finishes at
// start what an earlier run of the agent left.
//
// Each coming migration (a Migration) is stepped under its own lock, by
// the handler of the request that brought the event (the check, the
// stream, a commit, an abort) or by its timer, and its actions run in
// that goroutine. It must not decide (package migrate does) nor keep
// state beyond each migration's: the job table, the migrations in flight,
// the ledger and the keeper are their owners', reached through their
// methods, and what it needs of the agent's other concerns comes in as
// funcs (Config). It never imports the agent.
package inbound

import (
	"bufio"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"roam/internal/agent/jobtable"
	"roam/internal/agent/keeper"
	"roam/internal/agent/members"
	"roam/internal/agent/moves"
	"roam/internal/agent/pages"
	"roam/internal/agent/peer"
	"roam/internal/agent/phases"
	"roam/internal/agent/reopen"
	"roam/internal/agent/rounds"
	"roam/internal/api"
	"roam/internal/ckpt"
	"roam/internal/job"
	"roam/internal/lockorder"
	"roam/internal/migrate"
)

// Table is the node's migrations in flight (package moves): the coming
// ones are this driver's Migrations, the lazy dumps the source's.
type Table = moves.Table[*Migration, *pages.LazyDump]

// Config is what the destination's driver is made of. The funcs are the
// agent's other concerns; each may be called from any goroutine, with a
// Migration's lock held (none of them may take it).
type Config struct {
	// Self is this node's id.
	Self string
	// ImageDir is where a migration's images are received.
	ImageDir string
	// Rank is each Migration's lock's (package lockorder).
	Rank  lockorder.Rank
	Jobs  *jobtable.Table
	Moves *Table
	// Store is the job table on disk, whose ledger has every decision
	// of the machine before it is acted on.
	Store   *job.Store
	Keeper  *keeper.Keeper
	Members *members.Table
	Peers   *peer.Client
	Pages   *pages.Streams
	Rounds  *rounds.Rounds
	Procs   job.Processes
	Ckpt    ckpt.Checkpointer
	Log     *slog.Logger
	// Stop is closed when the agent stops; WG counts the runs Recover
	// starts, which the agent's Close waits for.
	Stop <-chan struct{}
	WG   *sync.WaitGroup

	// Draining says whether node drains, as this node knows.
	Draining func(node string) bool
	// CPUHere is the CPU count here of a copy restored just now
	// (job.Local.CPUBase).
	CPUHere func(id string, pid int) float64
	// JobMem is the memory, in bytes, this node gives its jobs' requests
	// (0: not counted); Admitted what the requests of the moves it
	// admitted and has not received add up to, in MiB, but job but's: a
	// job comes only with room for its request (jobtable.ReserveMem).
	JobMem   int64
	Admitted func(but string) float64
	// Event records a decision for `roam events`.
	Event func(api.Event)
	// Sender is the member that made a peer request (Transport.Sender).
	Sender func(r *http.Request) string
}

// Driver takes and drives the migrations and restarts coming to this
// node.
type Driver struct {
	self     string
	imageDir string
	rank     lockorder.Rank
	jobs     *jobtable.Table
	moves    *Table
	store    *job.Store
	keeper   *keeper.Keeper
	members  *members.Table
	peers    *peer.Client
	pages    *pages.Streams
	rounds   *rounds.Rounds
	procs    job.Processes
	ckpt     ckpt.Checkpointer
	log      *slog.Logger
	stop     <-chan struct{}
	wg       *sync.WaitGroup
	draining func(node string) bool
	cpuHere  func(id string, pid int) float64
	event    func(api.Event)
	jobMem   int64
	admitted func(but string) float64
	sender   func(r *http.Request) string
	// held are the descriptors the checks of migrations still to come
	// opened, for their restores (held.go).
	held holds
}

// New is the destination's driver of the node c describes.
func New(c Config) *Driver {
	return &Driver{self: c.Self, imageDir: c.ImageDir, rank: c.Rank, jobs: c.Jobs, moves: c.Moves, store: c.Store,
		keeper: c.Keeper, members: c.Members, peers: c.Peers, pages: c.Pages, rounds: c.Rounds, procs: c.Procs,
		ckpt: c.Ckpt, log: c.Log, stop: c.Stop, wg: c.WG, draining: c.Draining, cpuHere: c.CPUHere, event: c.Event,
		jobMem: c.JobMem, admitted: c.Admitted, sender: c.Sender}
}

// Migration is one migration coming to this node.
type Migration struct {
	mid    string          // set once, when it is made
	job    string          // set once, when it is made
	final  atomic.Bool     // the machine has ended
	mu     lockorder.Mutex // one step at a time; guards everything below
	m      *migrate.Dest
	hdr    migrate.Header
	body   *bufio.Reader // the stream, while its handler reads it
	spool  string
	images string
	stdin  *os.File // the writing end of a re-created stdin pipe
	lazy   <-chan struct{}
	ready  peer.MigrateReady
	// restored is when CRIU's restore ended (for SettleMS).
	restored time.Time
	// ph are the steps of the request being handled (the stream, a
	// commit), sent back with its answer.
	ph     phases.Log
	timer  *time.Timer
	halted bool // the ledger could not be written before the agent stopped
	// rst is a restart's run (package reopen); nil for a migration.
	rst *reopen.Run
	// leased is when the job's lease was last renewed on its source by
	// the commit's age (peer.CommitLeaseAge), by this node's clock; zero
	// when the commit said none.
	leased time.Time
}

// newMigration is migration mid of job id coming to this node, its
// machine new.
func (d *Driver) newMigration(mid, id string) *Migration {
	in := &Migration{m: &migrate.Dest{}, mid: mid, job: id}
	in.mu.Init(d.rank, "a migration's (inbound.Migration.mu)")
	return in
}

// Job is the migration's job (moves.Arrival).
func (in *Migration) Job() string { return in.job }

// Ended says the migration's machine has ended (moves.Arrival).
func (in *Migration) Ended() bool { return in.final.Load() }

// StopTimer stops the migration's timer, if it has one, and says whether
// it had fired already: for a test that ends with nothing left to run.
func (in *Migration) StopTimer() (fired bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.timer != nil && !in.timer.Stop()
}
