// Package news is the relay of jobs' news between the node a job runs on
// and its home node: output and exit status go home (the push loop, and
// the home's take of a push), stdin goes the other way, and the home
// serves what it has to `roam run` and `roam logs`. A home also marks
// lost the jobs of a node declared dead (the lost-job sweep) and removes
// ended jobs (after their keep, and with `roam purge`).
//
// It owns no state and holds no lock: the records are the job table's
// (package jobtable), the home's copy of the output the spools' (package
// spool), membership the members table's; what a home makes of an update
// is package relay's pure rule, and whether a node is dead package
// loss's. It does the I/O around them: the calls to other agents, /proc
// and the spool files read and written without the job table's lock. It
// must not import internal/agent: what it needs of the concerns that
// live there reaches it as Config's funcs.
package news

import (
	"log/slog"
	"path/filepath"
	"sync"
	"time"

	"roam/internal/agent/fencing"
	"roam/internal/agent/jobtable"
	"roam/internal/agent/limits"
	"roam/internal/agent/members"
	"roam/internal/agent/outfiles"
	"roam/internal/agent/peer"
	"roam/internal/agent/rounds"
	"roam/internal/agent/spool"
	"roam/internal/api"
	"roam/internal/fence"
	"roam/internal/job"
)

// The relay's tunables.
const (
	// pushEvery is how often a node looks for new output of its jobs.
	pushEvery = 50 * time.Millisecond
	// diskEvery is how often a node with jobs looks at its state disk's
	// free space between holds of its users' output budgets
	// (HoldLoop), for closeFor after a hold that found the disk falling
	// fast or short (limits.WatchClosely): a statfs, nothing more. Jobs
	// writing as fast as they can fill a tmpfs at a GiB a second: a disk
	// roomy at one hold was full at the next (the e2e flood's). Looking
	// every 5 ms all the while jobs run woke an agent 200 times a second,
	// some 1 % of a core on a loaded machine, for disks that stood still.
	diskEvery = 5 * time.Millisecond
	closeFor  = time.Second
	// quietFor is how long a job's node sends none of its output after
	// its home said it had no room for it (relay.Ack.Full): one chunk a
	// second, not one every push, while the home stays short.
	quietFor = time.Second
	// pushChunk bounds the bytes of one stream of one job in one push.
	pushChunk = 256 << 10
	// outputChunk bounds one answer to `roam run`'s output poll.
	outputChunk = 1 << 20
	// maxWait bounds an output long-poll.
	maxWait = 10 * time.Second
	// maxStdinPost bounds one stdin post: a pipe takes no more at once.
	maxStdinPost = 1 << 20
	// expireEvery is how often a home removes the jobs past their keep.
	expireEvery = time.Minute
)

// Config is what a Relay is built from: the owners it calls, the values
// of the agent's config it reads, and the funcs by which it reaches the
// concerns that live in the agent. Every func must be safe to call from
// any goroutine, with none of the owners' locks held.
type Config struct {
	// Self is this node's id.
	Self string
	// Limits are the agent's limits: output_bytes holds a job's output
	// here, keep_finished (Expired) the ended jobs at home.
	Limits limits.Limits
	// Free is what the state directory's disk has free, in bytes (-1:
	// unknown), held against limits.disk_reserve_bytes.
	Free func() int64
	// Fence is the fencing's config (package fence): the leases of the
	// jobs here, and how long a home waits before it restarts a job of a
	// node it lost. StateDir keeps the leases' file ("" none: tests).
	Fence    fence.Config
	StateDir string

	Jobs    *jobtable.Table
	Spools  *spool.Spools
	Members *members.Table
	Peers   *peer.Client
	// Rounds is told of the jobs that ended here (Ended), whose moves no
	// longer load their targets.
	Rounds *rounds.Rounds
	Procs  job.Processes
	Log    *slog.Logger
	// Files copies the output of the home's jobs that have files
	// (roam run --output, --error) into them.
	Files *outfiles.Writer

	// Stop closes when the agent stops: the loops return, and a long
	// poll of output answers with what it has.
	Stop <-chan struct{}
	// Left receives when a member left the cluster: the lost-job sweep
	// runs at once.
	Left <-chan struct{}

	// Event records an event for `roam events`.
	Event func(api.Event)
	// KickLoad has the load loop probe out of turn: jobs here ended.
	KickLoad func()
	// Record is a job's record from its home, this node or another.
	Record func(id string) (job.Record, error)
	// MovedTo waits until no migration moves job id here, and returns the
	// node it moved to ("" when it did not move on).
	MovedTo func(id string) string
	// DropCheckpoint asks node to drop job id's kept checkpoint older
	// than before (zero: any), in the background.
	DropCheckpoint func(node, id string, before time.Time)
	// RestartLost restarts a job lost with node lost from its newest
	// checkpoint, or marks it lost when it cannot; fenced: lost's fence
	// killed it (lost may be alive). It may block: the sweep and the
	// take of news run it in a goroutine of its own.
	RestartLost func(rec job.Record, lost string, fenced bool)
	// PurgeHomes asks every live home, this one included, to remove its
	// ended jobs as req says (peer.Purge), and returns the answers of
	// those that answered in time.
	PurgeHomes func(req peer.PurgeRequest) []api.PurgeResult
}

// Relay relays one node's jobs' news: as the node they run on, and as
// their home. It is safe for concurrent use.
type Relay struct {
	c Config
	// woken wakes HoldLoop when PushLoop is kicked (a start): the job
	// table has one kick, for the push.
	woken chan struct{}
	// leases fence the jobs here that their homes could restart (package
	// fencing): the push loop renews them and steps them.
	leases *fencing.Leases
	// deadTry are the homes, declared dead by membership, with a push in
	// flight (tryDead); a leaf lock.
	deadMu  sync.Mutex
	deadTry map[string]bool
	// dumps are the jobs here whose dump is under way or failed lately
	// (dumps.go).
	dumps dumps
	// full are the jobs here whose home's last answer took none of their
	// output, its disk short (relay.Ack.Full), and when; a leaf lock.
	fullMu sync.Mutex
	full   map[string]time.Time
	// roomMu guards writing: the bytes of output this home is writing
	// now, which its disk's free space does not show yet (takeOutput);
	// a leaf lock.
	roomMu  sync.Mutex
	writing int64
}

// New is the relay of c. It starts nothing: the agent runs PushLoop,
// HoldLoop and LostLoop, and its routes the rest.
func New(c Config) *Relay {
	file := ""
	if c.StateDir != "" {
		file = filepath.Join(c.StateDir, "fence.json")
	}
	r := &Relay{c: c, woken: make(chan struct{}, 1), leases: fencing.New(c.Fence, c.Procs, c.Log, file)}
	r.leases.Dumping = r.dumping
	return r
}
