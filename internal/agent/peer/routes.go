package peer

// The peer routes' paths, one naming scheme: /v1/peer/WHAT for a call
// about the node or a job, /v1/peer/CONCERN/STEP for the steps of a
// migration (migrate/...), a checkpoint (ckpt/...) and a restart
// (reopen/...). The agent's route table (internal/agent/routes.go)
// serves them; every caller names them here. A query a route reads is
// written by the caller beside the path.
const (
	Ping    = "/v1/peer/ping"    // GET: the node answers (a home's check before a restart)
	Events  = "/v1/peer/events"  // GET ?since=: the node's events
	Policy  = "/v1/peer/policy"  // GET: the running policy; POST: run one
	Drain   = "/v1/peer/drain"   // POST ?state=: drain the node or not
	Start   = "/v1/peer/start"   // POST: start jobs here
	Updates = "/v1/peer/updates" // POST: a running node's news of jobs homed here
	Signal  = "/v1/peer/signal"  // POST: signal jobs running here
	Purge   = "/v1/peer/purge"   // POST: forget ended jobs homed here
	Stdin   = "/v1/peer/stdin"   // POST ?id=: a job's standard input
	Record  = "/v1/peer/record"  // GET ?id=: a job's record at its home
	Output  = "/v1/peer/output"  // GET ?id=&out=&err=&wait=: a job's output at its home
	PS      = "/v1/peer/ps"      // GET: the jobs homed here
	Hold    = "/v1/peer/hold"    // POST ?id=: release a job held at start
	Note    = "/v1/peer/note"    // POST: a migration's or checkpoint's note to a job's home
	Sweep   = "/v1/peer/sweep"   // GET ?id=: a sweep's records at its home
	Cancel  = "/v1/peer/cancel"  // POST: end pending jobs homed here, signal those started

	MigrateStream  = "/v1/peer/migrate"         // POST: a migration's images (the stream)
	MigrateOut     = "/v1/peer/migrate/out"     // POST: move a job running here
	MigrateCheck   = "/v1/peer/migrate/check"   // POST: check a job's files as its owner
	MigrateAdmit   = "/v1/peer/migrate/admit"   // POST: reserve room; DELETE: give it back
	MigrateSink    = "/v1/peer/migrate/sink"    // GET ?mid=: the page sink of an eager move
	MigrateCommit  = "/v1/peer/migrate/commit"  // POST ?mid=&lease_age=: the source ended its copy
	MigrateAbort   = "/v1/peer/migrate/abort"   // POST ?mid=: the source runs on
	MigrateOutcome = "/v1/peer/migrate/outcome" // GET ?mid=: how a move ended here
	Pages          = "/v1/peer/pages"           // GET ?mid=: a frozen job's pages, as asked

	CkptTake    = "/v1/peer/ckpt/take"    // POST: checkpoint a job running here, answered with the file
	CkptKeep    = "/v1/peer/ckpt/keep"    // POST ?id=: keep a job's newest checkpoint here
	CkptDrop    = "/v1/peer/ckpt/drop"    // POST ?id=: drop a kept checkpoint
	CkptRestore = "/v1/peer/ckpt/restore" // POST: restore the checkpoint kept here where the home chose
	CkptPreempt = "/v1/peer/ckpt/preempt" // POST: preempt jobs running here, their checkpoints kept here

	Reopen       = "/v1/peer/reopen"        // POST: a home's consent to a run restarting a job
	ReopenCommit = "/v1/peer/reopen/commit" // POST: a run's copy waits stopped: the home's decision
	ReopenDone   = "/v1/peer/reopen/done"   // POST: a run failed, its copy discarded
	Restore      = "/v1/peer/restore"       // POST ?home=&lost=&why=[&rebind=1&slurm=&within=]: restart a checkpoint file here
)
