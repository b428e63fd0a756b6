package api

import (
	"fmt"
	"time"
)

// States of a job, as Job.State and Output.State show them.
const (
	StateStarting = "starting" // recorded, not yet confirmed started by its node
	// StatePending is a job recorded at its home and not started yet:
	// its sweep's --max-running is reached, or no node has room for its
	// request now (Job.PendingWhy).
	StatePending  = "pending"
	StateRunning  = "running"
	StateFinished = "finished"
	StateLost     = "lost" // its node died and it could not be recovered
	// StateStopped is a running job whose program is stopped (SIGSTOP,
	// ^Z; `roam kill -s CONT` continues it): roam ps shows it so, the
	// job's record keeps StateRunning.
	StateStopped = "stopped"
)

// RunRequest is `roam run`: start Count processes of Argv from the asked
// node, which becomes their home node. The caller's uid and gid come from
// SO_PEERCRED, never from here.
type RunRequest struct {
	Argv  []string `json:"argv"`
	Env   []string `json:"env"`
	Cwd   string   `json:"cwd"`
	Count int      `json:"count"`
	On    string   `json:"on,omitempty"` // node id; empty: the best node
	Pin   bool     `json:"pin,omitempty"`
	Stdin bool     `json:"stdin,omitempty"` // only with Count 1
	// CheckpointEvery checkpoints each job this often, keeping the newest
	// checkpoint on another node than the one running it, so that a job
	// whose node dies is restarted from it (0: none).
	CheckpointEvery time.Duration `json:"checkpoint_every,omitempty"`
	SweepRequest
	// CPUs is --cpus, the CPUs each process may use (0.5, 2; at most
	// three decimals), and MemBytes --mem, the memory each may hold: its
	// cgroup's limits wherever it runs. 0: the home's default
	// (jobs.default_cpus, jobs.default_mem_bytes).
	CPUs     float64 `json:"cpus,omitempty"`
	MemBytes int64   `json:"mem_bytes,omitempty"`
	// SlurmJob is the SLURM_JOB_ID the CLI runs under (docs/slurm.md):
	// the run serves that Slurm job's allocation, which the agent checks
	// with the caller's process and Slurm's controller. "": none.
	SlurmJob string `json:"slurm_job,omitempty"`
}

// SweepRequest is what of a `roam run` makes its jobs a sweep (package
// sweep): a run of Count > 1, or with any of these, is one.
type SweepRequest struct {
	// Args are --args-from's lines, one a job: index i runs Argv with
	// Args[i] in place of each {} (or appended, without one). Count is
	// their number.
	Args []string `json:"args,omitempty"`
	// Mems are each index's --mem, in bytes, when roam run's --mem names
	// a field of its --args-from line (--mem {2}M): as many as Count,
	// and MemBytes is then 0. nil: every index has MemBytes.
	Mems []int64 `json:"mems,omitempty"`
	// MaxRunning bounds the sweep's jobs running at once (0: none); the
	// others wait, pending, and start as others end.
	MaxRunning int `json:"max_running,omitempty"`
	// Output and Error are the files each index's stdout and stderr go
	// to (patterns of %A, %a, %j; relative to Cwd), written as the user.
	Output string `json:"output,omitempty"`
	Error  string `json:"error,omitempty"`
	// Rerun names a sweep of this node (SWEEP, or SWEEP:RANGES): its
	// failed and lost indices (or those named) run again, with their
	// commands, environments and patterns, as a new sweep; Argv, Env,
	// Cwd, Count and Args are then not given.
	Rerun string `json:"rerun,omitempty"`
}

// RunResponse names the started jobs and the nodes they went to ("" for
// a job pending), and their sweep, if they are one.
type RunResponse struct {
	IDs   []string `json:"ids"`
	Nodes []string `json:"nodes"`
	Sweep string   `json:"sweep,omitempty"`
}

// ExitLost is the exit status of `roam run` (and `roam attach`) when one
// of its jobs was lost with its node and none ended with another non-zero
// status first. The job is not restarted; `roam ps` shows it lost, with
// the node and the time, and it becomes running again if that node comes
// back and still runs it.
const ExitLost = 254

// EndDumpFailed is the end reason of a job that died by a signal as a
// dump of it failed (CRIU killed while its code was in the job's tasks)
// and that its home could not restart from a kept checkpoint.
const EndDumpFailed = "died as roam's dump of it failed (CRIU ended in the middle of it), with no checkpoint kept to restart it from: roam restart its owner's checkpoint file, if any"

// EndFenced is the end reason of a job its node's fence killed (exit
// 137) that its home could not restart: no checkpoint of it is kept on
// another node, only its owner's file (roam checkpoint, or the file of
// its last roam restart), which roam restart runs again.
const EndFenced = "killed by its node's fence (its node could not reach its home for fence.kill) with no checkpoint kept to restart it from: roam restart its owner's checkpoint file"

// Output is a piece of a job's output from given offsets, with its state.
type Output struct {
	ID        string `json:"id"`
	Stdout    []byte `json:"stdout,omitempty"`
	Stderr    []byte `json:"stderr,omitempty"`
	StdoutOff int64  `json:"stdout_off"` // offset just past Stdout
	StderrOff int64  `json:"stderr_off"`
	State     string `json:"state"`
	// Ended is true once the job is over and this piece holds the last of
	// its output; ExitCode is then set.
	Ended    bool `json:"ended"`
	ExitCode *int `json:"exit_code,omitempty"`
	// Node is where the job runs, or ran when it was lost (LostAt set,
	// State lost, Ended true, no ExitCode).
	Node   string    `json:"node,omitempty"`
	LostAt time.Time `json:"lost_at,omitzero"`
	// Inc is the job's incarnation (its restarts so far); Restart the
	// last restart, which cut the output back to its offsets: a follower
	// that read past them reads again from there.
	Inc     int      `json:"inc,omitempty"`
	Restart *Restart `json:"restart,omitempty"`
	// Cut, once Ended, says what of the job's output its home does not
	// have (Job.OutputCut).
	Cut string `json:"cut,omitempty"`
}

// Restart is one restart of a job from a checkpoint: at At, on Node, from
// the checkpoint taken at CheckpointAt on CheckpointNode; its output was
// cut back to Out and Err bytes and goes on from there (what came after
// it may come again).
type Restart struct {
	Inc            int       `json:"inc"`
	At             time.Time `json:"at"`
	Node           string    `json:"node"`
	CheckpointAt   time.Time `json:"checkpoint_at"`
	CheckpointNode string    `json:"checkpoint_node"`
	Out            int64     `json:"out"`
	Err            int64     `json:"err"`
	// Why: "roam restart", or the loss of the node it ran on.
	Why string `json:"why"`
	// MID names the run that restored it: the home commits it once, and
	// consents to it never again.
	MID string `json:"mid,omitempty"`
}

// Checkpoint is one checkpoint of a job, tried or taken: when, of which
// node's copy, how long the job was frozen, its size and where it went.
type Checkpoint struct {
	At       time.Time `json:"at"`
	Node     string    `json:"node"`
	FreezeMS float64   `json:"freeze_ms"`
	TotalMS  float64   `json:"total_ms"`
	Bytes    int64     `json:"bytes"`
	// StoredOn is the node keeping it (periodic checkpoints), or "" for
	// one handed to the user (roam checkpoint).
	StoredOn string `json:"stored_on,omitempty"`
	Out      int64  `json:"out"`
	Err      int64  `json:"err"`
	OK       bool   `json:"ok"`
	Error    string `json:"error,omitempty"`
	// CPU is what the CPU the job's program started on offers (its
	// features, as roam nodes' cpu_features): a restart from it goes
	// only to a node whose CPU has as much.
	CPU string `json:"cpu,omitempty"`
}

// CheckpointRequest is `roam checkpoint`: Stop ends the job once it is
// saved.
type CheckpointRequest struct {
	ID   string `json:"id"`
	Stop bool   `json:"stop,omitempty"`
}

// RestartResponse names the restarted job and its node.
type RestartResponse struct {
	ID   string `json:"id"`
	Node string `json:"node"`
	Inc  int    `json:"inc"`
}

// KillRequest is `roam kill`.
type KillRequest struct {
	IDs    []string `json:"ids"`
	Signal int      `json:"signal"`
}

// KillResult says, per job, whether the signal was delivered.
type KillResult struct {
	ID    string `json:"id"`
	Error string `json:"error,omitempty"`
}

// Job is one row of `roam ps`.
type Job struct {
	ID         string  `json:"id"`
	User       string  `json:"user"`
	UID        uint32  `json:"uid"`
	Home       string  `json:"home"`
	Node       string  `json:"node"`
	State      string  `json:"state"`
	CPUSeconds float64 `json:"cpu_s"`
	RSSMB      float64 `json:"rss_mb"`
	Migrations int     `json:"migrations"`
	AgeSeconds float64 `json:"age_s"`
	// Started and Ended (zero while it runs) are the home node's times:
	// Started when it began to run on its node (while it starts, when it
	// was placed; pending, when it was submitted).
	Started time.Time `json:"started"`
	Ended   time.Time `json:"ended,omitzero"`
	// LostAt is when the job was marked lost with its node (State lost).
	LostAt time.Time `json:"lost_at,omitzero"`
	Cmd    string    `json:"cmd"`
	// CmdCut says Cmd is cut to the first MaxPSCmd bytes of the command
	// line (a list of jobs); the whole is listed for a job asked by id.
	CmdCut   bool `json:"cmd_cut,omitempty"`
	ExitCode *int `json:"exit_code,omitempty"`
	// EndReason says why roam ended the job, when it did (a limit,
	// EndFenced).
	EndReason string `json:"end_reason,omitempty"`
	// OutputCut says what of its output its home does not have, when
	// its node dropped some: its home's state disk was short.
	OutputCut string `json:"output_cut,omitempty"`
	Pin       bool   `json:"pin,omitempty"`
	// PinReason says why the job cannot migrate, once roam found out.
	PinReason string `json:"pin_reason,omitempty"`
	// Manual: a manual migration put it where it is (see roam migrate).
	Manual       bool        `json:"manual,omitempty"`
	MigrationLog []Migration `json:"migration_log"`
	// CheckpointEvery is its periodic checkpoint interval; Checkpoints
	// its checkpoints tried (the newest kept on StoredOn); Restarts its
	// restarts from a checkpoint.
	CheckpointEvery time.Duration `json:"checkpoint_every,omitempty"`
	Checkpoints     []Checkpoint  `json:"checkpoints,omitempty"`
	Restarts        []Restart     `json:"restarts,omitempty"`
	// CPUs and MemBytes are its requests (roam run --cpus, --mem), its
	// cgroup's limits; 0: none (a job of an older roam, or no --mem).
	CPUs     float64 `json:"cpus,omitempty"`
	MemBytes int64   `json:"mem_bytes,omitempty"`
	JobSweep
	Accounting
}

// JobSweep is a job's place in its sweep, when it is of one.
type JobSweep struct {
	Sweep string `json:"sweep,omitempty"`
	Index *int   `json:"index,omitempty"`
	// PendingWhy says why a pending job waits.
	PendingWhy string `json:"pending_why,omitempty"`
	// OutputFile and ErrorFile are where its stdout and stderr are
	// written (roam run --output, --error), and FileError why one could
	// not be (the output is then in roam logs only).
	OutputFile string `json:"output_file,omitempty"`
	ErrorFile  string `json:"error_file,omitempty"`
	FileError  string `json:"file_error,omitempty"`
}

// Accounting is what an ended job used, sacct's columns: its CPU
// seconds (Job.CPUSeconds) summed over every node it ran on, read from
// its cgroup on the node it ended on; its peak memory, the most any of
// those nodes' cgroups counted; its elapsed time from its start to its
// end, and the nodes it ran on, in order.
type Accounting struct {
	PeakMB         float64  `json:"peak_mb,omitempty"`
	ElapsedSeconds float64  `json:"elapsed_s,omitempty"`
	Nodes          []string `json:"nodes,omitempty"`
}

// Sweep is `roam ps SWEEP`: a sweep's jobs, and how its indices stand.
type Sweep struct {
	ID   string `json:"id"`
	User string `json:"user"`
	UID  uint32 `json:"uid"`
	// Count is the -n of the run that made it (a rerun's jobs keep the
	// indices of the sweep they rerun, RerunOf).
	Count      int    `json:"count"`
	MaxRunning int    `json:"max_running,omitempty"`
	RerunOf    string `json:"rerun_of,omitempty"`
	// Summary says it in one line (ok, failed by exit status, lost, and
	// those not ended); the counts and index lists say it for scripts.
	Summary string `json:"summary"`
	Ended   bool   `json:"ended"`
	OK      int    `json:"ok"`
	Failed  []int  `json:"failed"`
	Lost    []int  `json:"lost"`
	Running int    `json:"running"`
	Pending int    `json:"pending"`
	// Jobs are its jobs by index.
	Jobs []SweepJob `json:"jobs"`
}

// SweepJob is one job of a sweep.
type SweepJob struct {
	ID       string `json:"id"`
	Index    int    `json:"index"`
	State    string `json:"state"`
	Node     string `json:"node,omitempty"`
	ExitCode *int   `json:"exit_code,omitempty"`
}

// Migration is one migration attempt: the answer to a MigrateRequest, and
// an entry of a job's migration log (the home node's job record keeps them).
type Migration struct {
	// MID identifies the attempt; a home node told twice keeps it once.
	MID string `json:"mid,omitempty"`
	// Seq is the job's moves once this one committed: of two notes, the
	// home keeps the newer.
	Seq  int       `json:"seq,omitempty"`
	At   time.Time `json:"at"`
	From string    `json:"from"`
	To   string    `json:"to"`
	Lazy bool      `json:"lazy"`
	// Bytes is what went over the network: images and spool, and with
	// Lazy the pages fetched afterwards.
	Bytes int64 `json:"bytes"`
	// FreezeMS is from the process stopping on From to it running on To.
	FreezeMS float64 `json:"freeze_ms"`
	// TotalMS is from the request to the end (for Lazy, to the last page).
	TotalMS float64 `json:"total_ms"`
	// WindowMS, for Lazy, is the post-copy window: from the restore until
	// the last page arrived, during which the job needs both nodes.
	WindowMS float64 `json:"window_ms,omitempty"`
	// The freeze's parts: CRIU's dump on From, the stream to To (images
	// written there), CRIU's restore on To, and To's settling after it
	// (the restored tasks' credentials checked, its ledger record made
	// durable).
	DumpMS    float64 `json:"dump_ms"`
	CopyMS    float64 `json:"copy_ms"`
	RestoreMS float64 `json:"restore_ms"`
	SettleMS  float64 `json:"settle_ms"`
	// Phases are the steps of the migration in the order they ran, each
	// timed on the node that did it: the frozen ones add up to FreezeMS
	// (a failed migration's too, until its job was thawed).
	Phases []Phase `json:"phases,omitempty"`
	OK     bool    `json:"ok"`
	// Why says who decided it: "roam migrate", or a policy's reason.
	Why   string `json:"why,omitempty"`
	Error string `json:"error,omitempty"`
}

// Phase is one step of a migration or a checkpoint. Side is "source" or
// "destination", the node that timed it; Frozen says the job was stopped
// during it. A step that waits on the other node (a call, the stream)
// counts only its own part: the other node's steps follow it.
type Phase struct {
	Side   string  `json:"side"`
	Name   string  `json:"name"`
	MS     float64 `json:"ms"`
	Frozen bool    `json:"frozen,omitempty"`
}

// Sides of a Phase.
const (
	SideSource = "source"
	SideDest   = "destination"
)

// MigrateRequest asks to move a running job to Node ("home" for its home
// node, "auto" to hand it back to the automatic policies).
type MigrateRequest struct {
	ID   string `json:"id"`
	Node string `json:"node"`
	Lazy bool   `json:"lazy,omitempty"`
}

// Event is a scheduling decision, for `roam events`: a placement, a
// migration a policy started (or that failed), a policy change.
type Event struct {
	At   time.Time `json:"at"`
	Node string    `json:"node"` // the node that decided
	Kind string    `json:"kind"` // place, migrate, failed, declined, policy
	Job  string    `json:"job,omitempty"`
	// UID is the job's owner, when the node knew it: only they and root
	// see Why, which may hold their file paths.
	UID  *uint32 `json:"uid,omitempty"`
	From string  `json:"from,omitempty"`
	To   string  `json:"to,omitempty"`
	Why  string  `json:"why"`
	// FreezeMS, for a migration, is how long the job was frozen.
	FreezeMS float64 `json:"freeze_ms,omitempty"`
}

// PolicyRequest is `roam policy load`: a built-in policy's name, or a
// policy file's text.
type PolicyRequest struct {
	Name string `json:"name,omitempty"`
	Text string `json:"text,omitempty"`
	// At is when it was loaded, set by the node that takes the request
	// from the CLI; Version orders loads between nodes (the highest wins).
	At      time.Time `json:"at,omitzero"`
	Version uint64    `json:"version,omitempty"`
}

// NodePolicy is one node's running policy.
type NodePolicy struct {
	Node string `json:"node"`
	Name string `json:"name"`
	Text string `json:"text"`
}

// StdinResult answers a stdin post: how many of its bytes the job's stdin
// pipe took. The rest did not fit (the job has not read what it has): send
// them again later.
type StdinResult struct {
	Accepted int `json:"accepted"`
	// Pending: the job has not started (it waits in its home's queue);
	// nothing was taken, the eof neither: send it again later.
	Pending bool `json:"pending,omitempty"`
}

// PurgeRequest is `roam purge`: remove ended jobs (their records and
// output) at every home. Without UID or All, the caller's own; UID
// (another user's) and All are root's.
type PurgeRequest struct {
	UID *uint32 `json:"uid,omitempty"`
	All bool    `json:"all,omitempty"`
}

// PurgeResult says how many ended jobs were removed.
type PurgeResult struct {
	Removed int `json:"removed"`
}

// Bytes is a byte count for people: "1.5 MiB".
func Bytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}
