// Package checkpoints is the agent's checkpoints of jobs and its restarts
// from them: `roam checkpoint` (a job's sealed file for its owner), the
// periodic checkpoints of `roam run --checkpoint-every` (each kept on
// another node, so that losing the node a job runs on does not lose the
// job), `roam restart FILE`, a home's restart of a job whose node was
// declared dead, and the home's consent to a restart's run.
//
// It holds no state of its own but the restarts after node loss it is
// trying (lostTries): the records and the restarts' marks are the job
// table's, the files the keeper's, a restart's run the
// destination driver's. It must not run a checkpoint's or a restart's
// machine itself: Config.Save and Config.Restore run them (the source and
// destination drivers), and this package only picks the nodes, moves the
// files and answers the routes.
package checkpoints

import (
	"crypto/sha256"
	"io"
	"log/slog"
	"os"
	"time"

	"roam/internal/agent/httpx"
	"roam/internal/agent/jobtable"
	"roam/internal/agent/keeper"
	"roam/internal/agent/members"
	"roam/internal/agent/peer"
	"roam/internal/agent/reopen"
	"roam/internal/api"
	"roam/internal/fence"
	"roam/internal/job"
	"roam/internal/migrate"
)

// Config is what the checkpoints need: the owners they call, the node's
// settings, and the parts of concerns still in package agent, as funcs.
// Every func may be called from several goroutines at once.
type Config struct {
	Self    string // this node's id
	Log     *slog.Logger
	Jobs    *jobtable.Table
	Store   *job.Store // the job table's bbolt store: a restart's new id
	Keeper  *keeper.Keeper
	Members *members.Table
	Peers   *peer.Client
	// Stall ends a transfer that makes no progress this long; CallTimeout
	// bounds a checkpoint or a restart asked of another node.
	Stall, CallTimeout time.Duration
	// Sweep is how often the kept checkpoints are swept
	// (limits.checkpoint_sweep).
	Sweep time.Duration
	// Stop closes when the agent stops: a restart's tries end.
	Stop <-chan struct{}

	// Draining says whether this node is draining (no job is placed on it).
	Draining func() bool
	// Admitted is what the memory requests of the moves this node
	// admitted and has not received add up to, in MiB, but job but's.
	Admitted func(but string) float64
	// CheckRun refuses a restart of a job of uid's with these arguments
	// here past the run limits (package launch).
	CheckRun func(uid uint32, argv, env []string) error
	// Allocation checks the Slurm job a restart names for its caller,
	// as a run's (package launch), and returns the nodes it may restart
	// on, each with the CPUs the job holds there (nil for "").
	Allocation func(c httpx.Caller, slurmJob string) (map[string]int, error)
	// Record is job id's record, from its home (this node or another).
	Record func(id string) (job.Record, error)
	// Fence is the node's fencing (a home waits for a lost node's fence,
	// fence.Config.RestartAt), and Started when its agent started.
	Fence   fence.Config
	Started func() time.Time
	// Event records an event for `roam events`.
	Event func(api.Event)
	// StoreFor picks the node that keeps a periodic checkpoint; nil is
	// keeper.StoreFor (tests give older agents' rules).
	StoreFor func(id, running, home string, live []string) string
	// Attained is the CPU time a job running here has had, on every
	// node it ran on (roam ps's).
	Attained func(job.Local) float64
	// Save checkpoints job id, running here, on the source machine: once
	// the file is sealed it calls deliver, which hands it on and says on
	// which node it is kept ("" for its user), and it returns once the
	// machine has ended, with the file (gone by then unless deliver kept
	// it). It blocks for the whole run.
	Save func(id string, stop bool, why string, deliver func(keeper.File) (string, error)) (keeper.File, error)
	// Restore runs a restart here, on the destination machine, from the
	// run's file, starting with start; it returns once the run ended (the
	// job runs here, or nothing of it does) with the machine's record.
	Restore func(run *reopen.Run, start migrate.Restart) (migrate.InRecord, error)
	// Post posts the size bytes write makes to path on the peer at addr,
	// decodes the answer into out and returns the bytes sent, whether the
	// stall guard ended it, and the exchange's error.
	Post func(addr, path string, size int64, write func(io.Writer) error, out any) (int64, bool, error)
}

// Checkpoints takes, keeps and restarts jobs' checkpoints. Safe for
// concurrent use.
type Checkpoints struct {
	cfg   Config
	log   *slog.Logger
	tries lostTries
}

// heldMB is what the memory requests held here add up to: the jobs
// here and the moves admitted, for a restart's placement.
func (c *Checkpoints) heldMB() float64 {
	return float64(c.cfg.Jobs.MemHeld(""))/(1<<20) + c.cfg.Admitted("")
}

// New returns the checkpoints of the node cfg describes.
func New(cfg Config) *Checkpoints { return &Checkpoints{cfg: cfg, log: cfg.Log} }

// Key seals and checks checkpoint files: the key given, or one derived
// from the gossip key.
func Key(given, gossipKey []byte) []byte {
	if len(given) > 0 {
		return given
	}
	k := sha256.Sum256(append([]byte("roam checkpoint "), gossipKey...))
	return k[:]
}

// sendFile posts a file to a peer and decodes its answer into out.
func (c *Checkpoints) sendFile(node, path, file string, size int64, out any) error {
	addr, err := c.cfg.Members.PeerAddr(node)
	if err != nil {
		return err
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	_, _, err = c.cfg.Post(addr, path, size, func(w io.Writer) error {
		_, err := io.CopyN(w, f, size)
		return err
	}, out)
	return peer.Err(err)
}
