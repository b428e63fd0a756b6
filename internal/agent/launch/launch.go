// Package launch starts jobs: `roam run` at the job's home (the request
// checked against the node's limits, each process placed, numbered and
// recorded before any starts; a sweep's jobs past its --max-running, and
// a run's that ask for memory, recorded pending, and started by the
// home's queue, package queue's rounds run by ReleaseLoop) and a home's
// start request on the node chosen to run the job. It owns the job ids'
// form (HOME.SEQ) and moves the job sequence past every record at start. Its state is the job
// table's, the spools', the membership's and the store's sequence: it
// keeps none and has no lock. It does not relay a job's output nor move
// it (the relay and the migration drivers do), and it must not import
// internal/agent.
package launch

import (
	"fmt"
	"log/slog"
	"os/user"
	"strconv"
	"strings"
	"time"

	"roam/internal/agent/httpx"
	"roam/internal/agent/jobtable"
	"roam/internal/agent/limits"
	"roam/internal/agent/members"
	"roam/internal/agent/peer"
	"roam/internal/agent/rounds"
	"roam/internal/agent/spool"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/migrate"
	"roam/internal/resources"
	"roam/internal/sweep"
)

// startBatch bounds the JSON of one start request's specs, below the
// httpx.MaxBody a peer reads (jobtable.PushBatch does so for a push).
const startBatch = httpx.MaxBody / 2

// Config is what a Starter is built from.
type Config struct {
	Self   string        // this node's id
	Limits limits.Limits // what a user's run may cost this node
	// Free is what the state directory's disk has free, in bytes (-1:
	// unknown): below limits.disk_reserve_bytes, the node starts no job.
	Free func() int64
	// PerJob gives a run's requests their defaults (jobs.default_cpus,
	// jobs.default_mem_bytes).
	PerJob limits.Jobs
	// JobMem is the memory, in bytes, this node gives its jobs' requests
	// (agent.Parts.JobMemory; 0: not counted): a start here reserves its
	// request's place in it first (jobtable.Table.ReserveMem).
	JobMem int64
	// Admitted is what the memory requests of the moves this node
	// admitted and has not received add up to, in MiB, but job but's.
	Admitted func(but string) float64
	Log      *slog.Logger
	// Store holds the job sequence new ids are taken from.
	Store   *job.Store
	Jobs    *jobtable.Table
	Spools  *spool.Spools
	Members *members.Table // where a run's processes go
	// Rounds is kicked when a job starts or ends here.
	Rounds *rounds.Rounds
	Peers  *peer.Client
	Procs  job.Processes
	// Draining tells whether this node is draining (roam node drain): it
	// starts no job then. It must not block.
	Draining func() bool
	// Event records a decision for `roam events`. Safe for concurrent
	// use; it must not block.
	Event func(api.Event)
	// Restore restarts preempted job rec on node from its checkpoint
	// (package checkpoints), and returns once the restart ran or failed.
	Restore func(rec job.Record, node string) error
	// Slurm asks after the Slurm job a run names (nil: the node serves
	// no allocation, slurm.enabled off); SlurmNode is this node's name
	// in Slurm.
	Slurm     SlurmAsk
	SlurmNode string
}

// Starter starts jobs, as their home and where they run. Safe for
// concurrent use: every call is through its owners.
type Starter struct {
	cfg Config
	fb  *feedback
}

// New builds a Starter from its owners.
func New(c Config) *Starter { return &Starter{cfg: c, fb: newFeedback()} }

// Run starts a `roam run` request from caller; this node is the home.
// A sweep's jobs past its --max-running, and a run's that have no room
// on any node now, are recorded pending, and start as the home's queue
// lets them (ReleaseLoop).
func (s *Starter) Run(c httpx.Caller, req api.RunRequest) (api.RunResponse, error) {
	p, err := s.plan(c, req)
	if err == nil {
		err = s.inAllocation(c, req, &p)
	}
	if err != nil {
		return api.RunResponse{}, err
	}
	on := req.On
	if req.Rerun != "" {
		on = p.part.On
	}
	targets, why, err := s.placeNow(on, p)
	if err != nil {
		return api.RunResponse{}, err
	}
	recs, byNode, err := s.newHomeRecords(c, p, targets, why)
	if err != nil {
		return api.RunResponse{}, err
	}
	if len(targets) < len(recs) {
		s.cfg.Jobs.KickRelease() // the queue's round starts what it can
	}
	starts, err := s.startAllAt(byNode)
	if err != nil {
		s.cfg.Jobs.ForgetHome(recs)
		return api.RunResponse{}, err
	}
	if err := s.cfg.Jobs.MarkStarted(recs[:len(targets)], starts); err != nil {
		return api.RunResponse{}, err
	}
	resp := api.RunResponse{Nodes: append(targets, make([]string, len(recs)-len(targets))...), Sweep: recs[0].Sweep.ID}
	for _, r := range recs {
		resp.IDs = append(resp.IDs, r.ID)
	}
	return resp, nil
}

// plan checks a run request and makes it ready: a new run's, or a
// rerun's of a sweep of this home.
func (s *Starter) plan(c httpx.Caller, req api.RunRequest) (plan, error) {
	if req.Rerun != "" {
		if !migrate.ValidEvery(req.CheckpointEvery) || req.MaxRunning < 0 {
			return plan{}, errkind.New(peer.ErrBadRequest, "--rerun: --max-running %d or --checkpoint-every %v out of range", req.MaxRunning, req.CheckpointEvery)
		}
		p, err := s.planRerun(c, req)
		if err != nil {
			return plan{}, err
		}
		argv, env := p.longest()
		return p, s.checkRunLimits(c, len(p.jobs), argv, env)
	}
	spec, reqs, err := runSpec(c, req, s.cfg.PerJob.DefaultRequest())
	if err != nil {
		return plan{}, err
	}
	if err := checkSweep(req); err != nil {
		return plan{}, err
	}
	// The limits before the plan, which is -n commands long.
	if err := s.checkRunLimits(c, req.Count, longestArgv(req), req.Env); err != nil {
		return plan{}, err
	}
	return planRun(spec, req, reqs), nil
}

// checkRunLimits refuses a run past one of the node's limits (the
// caller's live jobs and stored output at this home included). Root's runs
// are bounded too: its jobs cost the same.
func (s *Starter) checkRunLimits(c httpx.Caller, count int, argv, env []string) error {
	live, ended := s.cfg.Jobs.UserJobs(c.UID)
	// Only ended jobs' output counts: a live one is bounded by
	// output_bytes, and stat'ing it is what the disk would feel.
	var used int64
	for _, id := range ended {
		used += spool.Size(s.cfg.Spools.Dir(id))
	}
	if err := s.cfg.Limits.CheckRun(count, argv, env, live, used); err != nil {
		return errkind.New(peer.ErrLimit, "%v", err)
	}
	// The least the run's records cost: its arguments once and each
	// record's fixed part. The job table holds the whole charge to the
	// budget as it keeps them (AddHome); this refuses a run plainly past
	// it before a job id is taken.
	least := job.StringsBytes(argv) + job.StringsBytes(env) + int64(count)*job.RecordOverhead
	if err := s.cfg.Limits.RecordsOver(c.UID, s.cfg.Jobs.RecordsBytes(c.UID), least); err != nil {
		return errkind.New(peer.ErrLimit, "%v", err)
	}
	return nil
}

// CheckRestart refuses a user's restart of a job here (the job's one
// more live job, with these arguments) past one of the run limits, as
// a run of it would be.
func (s *Starter) CheckRestart(uid uint32, argv, env []string) error {
	return s.checkRunLimits(httpx.Caller{UID: uid}, 1, argv, env)
}

// runSpec checks a run request and makes the spec its processes share,
// its resource request completed from def, and each index's request when
// they differ (SweepRequest.Mems; nil: the spec's), the spec's then the
// largest.
func runSpec(c httpx.Caller, req api.RunRequest, def resources.Request) (job.Spec, []resources.Request, error) {
	bad := func(f string, a ...any) (job.Spec, []resources.Request, error) {
		return job.Spec{}, nil, errkind.New(peer.ErrBadRequest, f, a...)
	}
	switch {
	case req.Count < 1:
		return bad("-n: %d is below 1", req.Count)
	case len(req.Argv) == 0:
		return bad("no program given")
	case req.Stdin && req.Count != 1:
		return bad("stdin goes to a single process only (-n 1)")
	}
	if !migrate.ValidEvery(req.CheckpointEvery) {
		return bad("--checkpoint-every: %v is out of range (%v to %v)", req.CheckpointEvery, migrate.MinCheckpointEvery, migrate.MaxCheckpointEvery)
	}
	rr, err := limits.Request(req.CPUs, req.MemBytes, def)
	if err != nil {
		return bad("%v", err)
	}
	switch {
	case len(req.Mems) > 0 && len(req.Mems) != req.Count:
		return bad("mems (each index's --mem): %d for -n %d: give one a job", len(req.Mems), req.Count)
	case len(req.Mems) > 0 && req.MemBytes != 0:
		return bad("mems (each index's --mem) and mem_bytes (--mem) both given: give one")
	}
	var reqs []resources.Request
	for i, m := range req.Mems {
		r, err := limits.Request(req.CPUs, m, def)
		if err != nil {
			return bad("index %d: %v", i, err)
		}
		reqs = append(reqs, r)
		if i == 0 || r.MemBytes > rr.MemBytes {
			rr.MemBytes = r.MemBytes
		}
	}
	spec := job.Spec{UID: c.UID, GID: c.GID, Groups: c.Groups, Argv: req.Argv, Env: req.Env, Cwd: req.Cwd, Stdin: req.Stdin, Pin: req.Pin,
		CheckpointEvery: req.CheckpointEvery, Req: rr}
	if err := job.Check(spec); err != nil {
		return bad("%v", err)
	}
	return spec, reqs, nil
}

// newHomeRecords numbers a plan's jobs and keeps their records before
// any starts, so that output that arrives at once finds its job: the
// first len(targets), one a target, starting, the others pending. A
// sweep takes a number of the sequence for its id, before its jobs'. It
// returns the records and each node's specs.
func (s *Starter) newHomeRecords(c httpx.Caller, p plan, targets []string, why string) ([]job.Record, map[string][]job.Spec, error) {
	n := uint64(len(p.jobs))
	if p.part.Count > 0 {
		n++
	}
	first, err := s.cfg.Store.NextSeqs(int(n))
	if err != nil {
		return nil, nil, err
	}
	part := p.part
	if part.Count > 0 {
		part.ID = sweep.ID(s.cfg.Self, first)
		first++
	}
	now := time.Now()
	byNode := map[string][]job.Spec{}
	recs := make([]job.Record, 0, len(p.jobs))
	var placed []api.Event // said once the records are kept: a refused run leaves none
	name := userName(c.UID)
	for i, pj := range p.jobs {
		id := fmt.Sprintf("%s.%d", s.cfg.Self, first+uint64(i))
		env := p.spec.Env
		if pj.env != nil {
			env = pj.env
		}
		r := job.Record{
			ID: id, UID: c.UID, GID: c.GID, Groups: p.spec.Groups, User: name, Argv: pj.argv,
			Env: resources.ThreadEnv(jobEnv(env, id, part.ID, pj.index, max(part.Count, 1)), pj.req),
			Cwd: p.spec.Cwd, Home: s.cfg.Self, Stdin: p.spec.Stdin, Pin: p.spec.Pin, Slurm: p.spec.Slurm, Within: WithinIDs(p.within), CheckpointEvery: p.spec.CheckpointEvery, Req: pj.req,
			State: job.StatePending, Started: now, Group: fmt.Sprintf("%s.%d", s.cfg.Self, first), Sweep: part,
		}
		r.Sweep.Index = pj.index
		if i < len(targets) {
			r.Node, r.State = targets[i], job.StateStarting
			byNode[r.Node] = append(byNode[r.Node], specOf(r))
			placed = append(placed, api.Event{At: now, Kind: "place", Job: id, UID: &c.UID, To: r.Node, Why: why})
		}
		recs = append(recs, r)
	}
	// The ids are taken in one step of the job table, so that a restart
	// that needs one of them (reopen) sees it taken; an id a record holds
	// already (the table's sequence behind its records) is not written
	// over.
	id, err := s.cfg.Jobs.AddHome(recs, s.cfg.Limits.RecordsOver)
	switch {
	case err != nil:
		return nil, nil, err
	case id != "":
		return nil, nil, errkind.New(peer.ErrUnavailable, "job id %s is another job's: this node's job sequence is behind its records", id)
	}
	if err := s.makeSpools(recs); err != nil {
		return nil, nil, err
	}
	for _, e := range placed {
		s.cfg.Event(e)
	}
	return recs, byNode, nil
}

// makeSpools makes the home's output spool of each of recs, just added
// to the job table, outside its lock (-n 10000 is as many directories).
// Jobs whose output would have nowhere to go are not started: on a
// failure the records go again.
func (s *Starter) makeSpools(recs []job.Record) error {
	for i := range recs {
		if err := s.cfg.Spools.Make(recs[i].ID); err != nil {
			s.cfg.Jobs.ForgetHome(recs)
			return errkind.New(peer.ErrUnavailable, "job %s's output spool: %v", recs[i].ID, err)
		}
	}
	return nil
}

// jobEnv is the environment of process index of a `roam run -n count`: the
// caller's, with ROAM_JOB (its id), ROAM_INDEX (0 to count-1), ROAM_COUNT
// and, in a sweep, ROAM_SWEEP (its id) in place of any the caller had, so
// that one command line can split a sweep (as SLURM_ARRAY_TASK_ID does).
func jobEnv(env []string, id, sweepID string, index, count int) []string {
	out := make([]string, 0, len(env)+4)
	for _, e := range env {
		if k, _, _ := strings.Cut(e, "="); k != "ROAM_JOB" && k != "ROAM_INDEX" && k != "ROAM_COUNT" && k != "ROAM_SWEEP" {
			out = append(out, e)
		}
	}
	out = append(out, "ROAM_JOB="+id, "ROAM_INDEX="+strconv.Itoa(index), "ROAM_COUNT="+strconv.Itoa(count))
	if sweepID != "" {
		out = append(out, "ROAM_SWEEP="+sweepID)
	}
	return out
}

func userName(uid uint32) string {
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		return u.Username
	}
	return strconv.FormatUint(uint64(uid), 10)
}
