package agent

// The job table: jobs whose home is this node and jobs running on it,
// finding a job's record, signals (`roam kill`) and `roam ps`. Starting
// jobs is in run.go, their output and stdin in relay.go.

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/agent/spool"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/lockorder"
	"roam/internal/migrate"
)

// Tunables of the job manager.
const (
	// pushEvery is how often a node looks for new output of its jobs.
	pushEvery = 50 * time.Millisecond
	// pushChunk bounds the bytes of one stream of one job in one push.
	pushChunk = 256 << 10
	// outputChunk bounds one answer to `roam run`'s output poll.
	outputChunk = 1 << 20
	// maxWait bounds an output long-poll.
	maxWait = 10 * time.Second
	// psTimeout bounds the wait for one node's part of `roam ps`.
	psTimeout = 3 * time.Second
	// startBatch and pushBatch bound the JSON of one start request's
	// specs and the output bytes of one push (4/3 as many once JSON's
	// base64 has them), below the maxBody a peer reads.
	startBatch = maxBody / 2
	pushBatch  = maxBody / 2
)

// jobs is the job manager's in-memory state; the bbolt store is the truth
// that survives a restart.
type jobs struct {
	mu    lockorder.Mutex
	home  map[string]*job.Record   // jobs whose home is this node
	local map[string]*localJob     // jobs running on this node
	wake  map[string]chan struct{} // closed when a home job gets news
	heard map[string]time.Time     // node -> its last update to this home
	kick  chan struct{}
	// restarting are the jobs this home consented to restart, with their
	// record from before, until the restore's end is known (restart.go).
	restarting map[string]*job.Record
	// uploading are the users with a roam restart upload in progress;
	// restoring the jobs being restored here from a checkpoint.
	uploading map[uint32]bool
	restoring map[string]bool
}

// wakeReaders wakes the readers waiting for news of home job id (Output).
// mu held.
func (j *jobs) wakeReaders(id string) {
	if ch := j.wake[id]; ch != nil {
		close(ch)
		delete(j.wake, id)
	}
}

// putHome writes changed copies of home records to the store, then, once
// they are durable, to the table in memory; on an error neither changes.
// mu held.
func (j *jobs) putHome(store *job.Store, next map[string]*job.Record) error {
	if len(next) == 0 {
		return nil
	}
	recs := make([]job.Record, 0, len(next))
	for _, r := range next {
		recs = append(recs, *r)
	}
	if err := store.PutRecords(recs...); err != nil {
		return err
	}
	for id, r := range next {
		*j.home[id] = *r
	}
	return nil
}

// newsOf is the record update u changes: its copy in next, or a new copy
// of the home's. known and stale say what takeOutput found of the job
// (known: it had a record; stale: u is of an older incarnation). When u
// is news of no record, refused is the answer. mu held.
func (j *jobs) newsOf(u update, known, stale bool, next map[string]*job.Record, self string) (rec *job.Record, refused *ack) {
	if rec := next[u.ID]; rec != nil {
		return rec, nil
	}
	cur := j.home[u.ID]
	if cur == nil || !known {
		// Forgotten after a failed start: nobody will read it. Only a
		// job's home can say it has no record of it; news that reached
		// another node (a stale home address) is dropped, not ended. A
		// job purged while its output was written is gone as well.
		h, _ := homeOf(u.ID)
		return nil, &ack{Done: true, Gone: h == self}
	}
	if stale || u.Inc < cur.Inc {
		// A copy of an incarnation before the job's restart from a
		// checkpoint (its node was cut off, not dead): it is ended, and
		// nothing it says is taken.
		return nil, &ack{Done: true, Gone: true}
	}
	c := *cur
	return &c, nil
}

// hasLocal says job id runs here as pid.
func (j *jobs) hasLocal(id string, pid int) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	lj := j.local[id]
	return lj != nil && lj.rec.PID == pid
}

// count is how many jobs run here.
func (j *jobs) count() int {
	j.mu.Lock()
	defer j.mu.Unlock()
	return len(j.local)
}

// owner is the owner of a job running here, nil when unknown (a record
// of an older roam says uid 0: root's eyes only).
func (j *jobs) owner(id string) *uint32 {
	j.mu.Lock()
	defer j.mu.Unlock()
	if lj := j.local[id]; lj != nil {
		uid := lj.rec.UID
		return &uid
	}
	return nil
}

// homeRecord is the record of a job whose home is this node.
func (j *jobs) homeRecord(id string) (job.Record, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if r := j.home[id]; r != nil {
		return *r, nil
	}
	return job.Record{}, errkind.New(peer.ErrNotFound, "unknown job %s", id)
}

// localJob is a job running on this node.
type localJob struct {
	rec    job.Local
	stdin  *os.File // nil when the job takes no stdin or after a restart
	ackOut int64    // what the home node has; -1 until it told us
	ackErr int64
	// migrating: a migration is moving it; the push loop leaves it alone.
	migrating bool
	// lastTry is when a policy last tried to move it and failed;
	// unmovable says why, when the reason will not go away (it pins).
	lastTry   time.Time
	unmovable string
	// lastPush is when news of it last went to its home (see aliveEvery).
	lastPush time.Time
	// sizeChecked is when its spool was last held against
	// limits.output_bytes; why says why this node killed it, if it did.
	sizeChecked time.Time
	why         string
	// arrivedAt is when it started or came here; lastCkpt when its last
	// periodic checkpoint here began; ckptJob its record's part a
	// checkpoint keeps, once asked of its home.
	arrivedAt time.Time
	lastCkpt  time.Time
	ckptJob   *migrate.CheckpointJob
}

// openJobs opens the job table and reloads what an earlier run left.
func (a *Agent) openJobs() error {
	st, err := job.Open(filepath.Join(a.cfg.StateDir, "state.db"))
	if err != nil {
		return err
	}
	a.store = st
	a.jobs = &jobs{home: map[string]*job.Record{}, local: map[string]*localJob{}, wake: map[string]chan struct{}{},
		heard: map[string]time.Time{}, kick: make(chan struct{}, 1),
		restarting: map[string]*job.Record{}}
	a.jobs.initLocks()
	a.spools = spool.New(filepath.Join(a.cfg.StateDir, "home"), rankSpool)
	// One bad value (a disk error, a bug of an older roam) must not keep
	// the agent, and every other job, from starting.
	bad, err := st.SetAsideCorrupt()
	if err != nil {
		return err
	}
	for _, b := range bad {
		a.log.Error("job table: a record that does not decode was set aside", "bucket", b.Bucket, "key", b.Key, "err", b.Err)
		a.event(api.Event{Kind: "corrupt", Job: b.Key, Why: fmt.Sprintf("its %s record in the job table does not decode (%s); set aside under corrupt/", b.Bucket, b.Err)})
	}
	recs, err := st.Records()
	if err != nil {
		return err
	}
	var last uint64
	for i := range recs {
		a.jobs.home[recs[i].ID] = &recs[i]
		if h, seq, ok := jobSeq(recs[i].ID); ok && h == a.cfg.NodeID {
			last = max(last, seq)
		}
	}
	// A new id comes after every record's, even when the sequence fell
	// behind them (a job table put back from a copy, a record set aside).
	if err := st.BumpSeq(last); err != nil {
		return err
	}
	locals, err := st.Locals()
	if err != nil {
		return err
	}
	for _, l := range locals {
		a.jobs.local[l.ID] = &localJob{rec: l, ackOut: -1, ackErr: -1, arrivedAt: time.Now()}
	}
	a.log.Info("job table loaded", "home_jobs", len(recs), "local_jobs", len(locals))
	return nil
}

// homeOf returns the home node of a job id HOME.SEQ.
func homeOf(id string) (string, bool) { return migrate.JobHome(id) }

// jobSeq is a job id's home node and sequence number (HOMENODE.SEQ).
func jobSeq(id string) (string, uint64, bool) {
	home, ok := homeOf(id)
	if !ok {
		return "", 0, false
	}
	seq, err := strconv.ParseUint(id[len(home)+1:], 10, 64)
	return home, seq, err == nil
}

func canTouch(c Caller, uid uint32) bool { return c.UID == 0 || c.UID == uid }

// record returns a job's record from its home node (this one or another).
func (a *Agent) record(id string) (job.Record, error) {
	home, ok := homeOf(id)
	if !ok {
		return job.Record{}, errkind.New(peer.ErrBadRequest, "%q is not a job id (HOMENODE.SEQ)", id)
	}
	var r job.Record
	err := a.peers.Call(home, http.MethodGet, peer.Record+"?id="+id, nil, &r)
	return r, err
}

// ---- signals ----

// Kill delivers a signal to jobs wherever they run; a caller may signal only
// their own jobs, root any.
func (a *Agent) Kill(c Caller, req api.KillRequest) ([]api.KillResult, error) {
	if req.Signal < 1 || req.Signal > 64 {
		return nil, errkind.New(peer.ErrBadRequest, "-s: signal %d is out of range (1 to 64)", req.Signal)
	}
	var out []api.KillResult
	for _, id := range req.IDs {
		res := api.KillResult{ID: id}
		r, err := a.record(id)
		switch {
		case err != nil:
			res.Error = err.Error()
		case !canTouch(c, r.UID):
			res.Error = id + ": permission denied"
		case r.Over():
			res.Error = fmt.Sprintf("%s: job has %s", id, r.State)
		case r.State == job.StateStarting:
			res.Error = fmt.Sprintf("%s: job is still starting", id)
		default:
			if err := a.signalOn(r.Node, id, req.Signal); err != nil {
				res.Error = fmt.Sprintf("%s: %v", id, err)
			}
		}
		out = append(out, res)
	}
	return out, nil
}

// signalOn signals job id, which runs on node (this one or another).
func (a *Agent) signalOn(node, id string, sig int) error {
	return a.peers.Call(node, http.MethodPost, peer.Signal, map[string]any{"id": id, "signal": sig}, nil)
}

// signalJob signals a job running here: its roam-init, which forwards the
// signal to the program's process group (SIGKILL ends the namespace).
func (a *Agent) signalJob(id string, sig syscall.Signal) error {
	lj, movedTo := a.settledLocal(id)
	if movedTo != "" {
		return a.signalOn(movedTo, id, int(sig))
	}
	if lj == nil || !a.procs.Alive(lj.rec.PID, lj.rec.StartTix) {
		return errkind.New(peer.ErrNotFound, "job %s is not running on node %s", id, a.cfg.NodeID)
	}
	return a.procs.Signal(lj.rec.PID, sig)
}

// settledLocal waits until no migration moves job id, then returns it
// when it runs here, or the node it moved to (for a caller whose record of
// the job's node is older than the move).
func (a *Agent) settledLocal(id string) (*localJob, string) {
	deadline := time.Now().Add(restoreTimeout)
	for {
		a.jobs.mu.Lock()
		lj := a.jobs.local[id]
		movedTo := a.migr.MovedTo(id)
		busy := lj != nil && lj.migrating
		a.jobs.mu.Unlock()
		if !busy || time.Now().After(deadline) {
			if lj != nil {
				movedTo = ""
			}
			return lj, movedTo
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// ---- ps ----

// usage is a running job's resource use on its node.
type usage struct {
	CPUSeconds float64 `json:"cpu_s"`
	RSSMB      float64 `json:"rss_mb"`
	// Stopped: the job's program is stopped (SIGSTOP, ^Z).
	Stopped bool `json:"stopped,omitempty"`
}

type psPart struct {
	Records []job.Record     `json:"records"`
	Usage   map[string]usage `json:"usage"`
}

func (a *Agent) psLocal() psPart {
	type proc struct {
		id  string
		pid int
		tix uint64
		rec job.Local
	}
	var procs []proc
	p := psPart{Usage: map[string]usage{}}
	a.jobs.mu.Lock()
	for _, r := range a.jobs.home {
		rec := *r
		rec.Env = nil // ps shows none, and it may be megabytes a job
		p.Records = append(p.Records, rec)
	}
	for id, lj := range a.jobs.local {
		procs = append(procs, proc{id, lj.rec.PID, lj.rec.StartTix, lj.rec})
	}
	a.jobs.mu.Unlock()
	// /proc and the cgroups are read without the job lock.
	for _, pr := range procs {
		if a.procs.Alive(pr.pid, pr.tix) {
			// Its CPU time on every node it ran on, as if it had run here
			// all along (the user sees the job as local).
			cpu, rss := a.procs.Usage(pr.id, pr.pid)
			p.Usage[pr.id] = usage{attainedFrom(cpu, pr.rec), rss, a.procs.Stopped(pr.pid)}
		}
	}
	return p
}

// PS lists jobs on every node the caller may see.
func (a *Agent) PS(c Caller, all bool) []api.Job {
	parts := fanOut[psPart](a, http.MethodGet, peer.PS, nil)
	use := map[string]usage{}
	for _, p := range parts {
		for id, u := range p.Usage {
			use[id] = u
		}
	}
	now := time.Now()
	out := []api.Job{}
	for _, p := range parts {
		for _, r := range p.Records {
			if !canTouch(c, r.UID) || (!all && r.UID != c.UID) {
				continue
			}
			u := use[r.ID]
			state := r.State
			if state == api.StateRunning && u.Stopped {
				state = api.StateStopped
			}
			out = append(out, api.Job{
				ID: r.ID, User: r.User, UID: r.UID, Home: r.Home, Node: r.Node, State: state,
				CPUSeconds: u.CPUSeconds, RSSMB: u.RSSMB, Migrations: r.Migrations,
				AgeSeconds: now.Sub(r.Started).Seconds(), Started: r.Started, Ended: r.Ended, LostAt: r.LostAt, Cmd: strings.Join(r.Argv, " "),
				ExitCode: r.ExitCode, EndReason: r.EndReason, Pin: r.Pin, PinReason: r.PinReason, Manual: r.Manual,
				MigrationLog:    append([]job.Migration{}, r.MigrationLog...),
				CheckpointEvery: r.CheckpointEvery, Checkpoints: slices.Clone(r.Checkpoints), Restarts: slices.Clone(r.Restarts),
			})
		}
	}
	sortJobs(out)
	return out
}
