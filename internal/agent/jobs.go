package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/user"
	"path/filepath"
	"roam/internal/errkind"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"roam/internal/api"
	"roam/internal/job"
	"roam/internal/sched"
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
	// peerTimeout bounds a call to another agent; psTimeout the wait for
	// one node's part of `roam ps`.
	peerTimeout = 30 * time.Second
	psTimeout   = 3 * time.Second
	// maxCount bounds `roam run -n`.
	maxCount = 100000
)

// jobs is the job manager's in-memory state; the bbolt store is the truth
// that survives a restart.
type jobs struct {
	mu    sync.Mutex
	home  map[string]*job.Record   // jobs whose home is this node
	local map[string]*localJob     // jobs running on this node
	wake  map[string]chan struct{} // closed when a home job gets news
	kick  chan struct{}
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
}

// update is one job's news from its current node to its home node.
type update struct {
	ID     string `json:"id"`
	OutOff int64  `json:"out_off"`
	Out    []byte `json:"out,omitempty"`
	ErrOff int64  `json:"err_off"`
	Err    []byte `json:"err,omitempty"`
	// Exit, with the final sizes of both streams, once the job ended.
	Exit     *int  `json:"exit,omitempty"`
	FinalOut int64 `json:"final_out"`
	FinalErr int64 `json:"final_err"`
}

// ack is the home node's answer to an update.
type ack struct {
	Out  int64 `json:"out"`
	Err  int64 `json:"err"`
	Done bool  `json:"done"`
}

// startRequest is a home node asking this node to start jobs.
type startRequest struct {
	Home     string     `json:"home"`
	HomeAddr string     `json:"home_addr"`
	Jobs     []job.Spec `json:"jobs"`
}

type startResult struct {
	ID    string `json:"id"`
	PID   int    `json:"pid"`
	Error string `json:"error,omitempty"`
}

// openJobs opens the job table and reloads what an earlier run left.
func (a *Agent) openJobs() error {
	st, err := job.Open(filepath.Join(a.cfg.StateDir, "state.db"))
	if err != nil {
		return err
	}
	a.store = st
	a.jobs = &jobs{home: map[string]*job.Record{}, local: map[string]*localJob{}, wake: map[string]chan struct{}{}, kick: make(chan struct{}, 1)}
	recs, err := st.Records()
	if err != nil {
		return err
	}
	for i := range recs {
		a.jobs.home[recs[i].ID] = &recs[i]
	}
	locals, err := st.Locals()
	if err != nil {
		return err
	}
	for _, l := range locals {
		a.jobs.local[l.ID] = &localJob{rec: l, ackOut: -1, ackErr: -1}
	}
	a.launcher = job.Launcher{Init: a.cfg.InitPath, SpoolRoot: filepath.Join(a.cfg.StateDir, "spool"), ExecMu: &a.execMu}
	if a.cfg.Cgroup != "" {
		for _, d := range a.probe.Layout.Dirs(a.cfg.Cgroup) {
			a.launcher.CgroupProcs = append(a.launcher.CgroupProcs, filepath.Join(d, "cgroup.procs"))
		}
	}
	a.log.Info("job table loaded", "home_jobs", len(recs), "local_jobs", len(locals))
	return nil
}

func (a *Agent) homeSpool(id string) string { return filepath.Join(a.cfg.StateDir, "home", id) }

// homeOf returns the home node of a job id HOME.SEQ.
func homeOf(id string) (string, bool) {
	i := strings.LastIndexByte(id, '.')
	if i <= 0 || i == len(id)-1 {
		return "", false
	}
	if _, err := strconv.ParseUint(id[i+1:], 10, 64); err != nil {
		return "", false
	}
	return id[:i], true
}

func canTouch(c Caller, uid uint32) bool { return c.UID == 0 || c.UID == uid }

// callerGroups reads the caller's supplementary groups from /proc.
func callerGroups(pid int32) []uint32 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Groups:"); ok {
			var gs []uint32
			for _, f := range strings.Fields(rest) {
				if g, err := strconv.ParseUint(f, 10, 32); err == nil {
					gs = append(gs, uint32(g))
				}
			}
			return gs
		}
	}
	return nil
}

func userName(uid uint32) string {
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		return u.Username
	}
	return strconv.FormatUint(uint64(uid), 10)
}

// ---- home node: run ----

// jobEnv is the environment of process index of a `roam run -n count`: the
// caller's, with ROAM_JOB (its id), ROAM_INDEX (0 to count-1) and
// ROAM_COUNT in place of any the caller had, so that one command line can
// split a sweep (as SLURM_ARRAY_TASK_ID does).
func jobEnv(env []string, id string, index, count int) []string {
	out := make([]string, 0, len(env)+3)
	for _, e := range env {
		if k, _, _ := strings.Cut(e, "="); k != "ROAM_JOB" && k != "ROAM_INDEX" && k != "ROAM_COUNT" {
			out = append(out, e)
		}
	}
	return append(out, "ROAM_JOB="+id, "ROAM_INDEX="+strconv.Itoa(index), "ROAM_COUNT="+strconv.Itoa(count))
}

// Run starts a `roam run` request from caller; this node is the home.
func (a *Agent) Run(c Caller, req api.RunRequest) (api.RunResponse, error) {
	switch {
	case req.Count < 1 || req.Count > maxCount:
		return api.RunResponse{}, errkind.New(ErrBadRequest, "-n: %d is out of range (1 to %d)", req.Count, maxCount)
	case len(req.Argv) == 0:
		return api.RunResponse{}, errkind.New(ErrBadRequest, "no program given")
	case req.Stdin && req.Count != 1:
		return api.RunResponse{}, errkind.New(ErrBadRequest, "stdin goes to a single process only (-n 1)")
	}
	spec := job.Spec{UID: c.UID, GID: c.GID, Groups: callerGroups(c.PID), Argv: req.Argv, Env: req.Env, Cwd: req.Cwd, Stdin: req.Stdin, Pin: req.Pin}
	if err := job.Check(spec); err != nil {
		return api.RunResponse{}, errkind.New(ErrBadRequest, "%v", err)
	}
	targets, why, err := a.place(req)
	if err != nil {
		return api.RunResponse{}, err
	}
	first, err := a.store.NextSeqs(req.Count)
	if err != nil {
		return api.RunResponse{}, err
	}
	now := time.Now()
	byNode := map[string][]job.Spec{}
	var recs []job.Record
	name := userName(c.UID)
	for i, node := range targets {
		s := spec
		s.ID = fmt.Sprintf("%s.%d", a.cfg.NodeID, first+uint64(i))
		s.Env = jobEnv(req.Env, s.ID, i, req.Count)
		byNode[node] = append(byNode[node], s)
		recs = append(recs, job.Record{
			ID: s.ID, UID: c.UID, GID: c.GID, Groups: spec.Groups, User: name, Argv: req.Argv, Env: s.Env,
			Cwd: req.Cwd, Home: a.cfg.NodeID, Node: node, Stdin: req.Stdin, Pin: req.Pin,
			State: job.StateStarting, Started: now, Group: fmt.Sprintf("%s.%d", a.cfg.NodeID, first),
		})
		a.event(api.Event{At: now, Kind: "place", Job: s.ID, To: node, Why: why})
	}
	// Records first, so output that arrives at once finds its job.
	if err := a.store.PutRecords(recs...); err != nil {
		return api.RunResponse{}, err
	}
	a.jobs.mu.Lock()
	for i := range recs {
		a.jobs.home[recs[i].ID] = &recs[i]
		_ = os.MkdirAll(a.homeSpool(recs[i].ID), 0o700)
	}
	a.jobs.mu.Unlock()

	// Start on every node at once; each node starts its share in turn.
	type result struct {
		node string
		res  []startResult
		err  error
	}
	results := make(chan result, len(byNode))
	for node, specs := range byNode {
		go func(node string, specs []job.Spec) {
			res, err := a.startOn(node, specs)
			results <- result{node, res, err}
		}(node, specs)
	}
	var started []string
	var firstErr error
	for range byNode {
		r := <-results
		if r.err != nil && firstErr == nil {
			firstErr = fmt.Errorf("node %s: %w", r.node, r.err)
		}
		for _, x := range r.res {
			if x.Error != "" && firstErr == nil {
				firstErr = fmt.Errorf("node %s: %s", r.node, x.Error)
			}
			if x.Error == "" {
				started = append(started, x.ID)
			}
		}
	}
	if firstErr != nil {
		// Leave nothing behind: end what did start, forget every record.
		for _, id := range started {
			_ = a.signalJob(id, syscall.SIGKILL)
		}
		a.forgetHome(recs)
		return api.RunResponse{}, firstErr
	}
	// Every node confirmed: the jobs run. A job that already reported its
	// end (a fast one) stays finished.
	a.jobs.mu.Lock()
	var running []job.Record
	for _, r := range recs {
		if h := a.jobs.home[r.ID]; h != nil && h.State == job.StateStarting {
			h.State = job.StateRunning
			running = append(running, *h)
		}
	}
	a.jobs.mu.Unlock()
	if err := a.store.PutRecords(running...); err != nil {
		return api.RunResponse{}, err
	}
	resp := api.RunResponse{Nodes: targets}
	for _, r := range recs {
		resp.IDs = append(resp.IDs, r.ID)
	}
	return resp, nil
}

func (a *Agent) forgetHome(recs []job.Record) {
	a.jobs.mu.Lock()
	defer a.jobs.mu.Unlock()
	for _, r := range recs {
		delete(a.jobs.home, r.ID)
		os.RemoveAll(a.homeSpool(r.ID))
	}
	_ = a.store.DeleteRecords(recs)
}

// place picks a node for each process: --on, or the policy's placement
// (least load per capacity from the load vector, random-two, or
// round-robin).
func (a *Agent) place(req api.RunRequest) ([]string, string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if req.On != "" {
		p := a.known[req.On]
		if p == nil {
			return nil, "", errkind.New(ErrBadRequest, "--on: no node %q in the cluster", req.On)
		}
		if !p.alive {
			return nil, "", errkind.New(ErrUnavailable, "--on: node %s is not alive", req.On)
		}
		out := make([]string, req.Count)
		for i := range out {
			out[i] = req.On
		}
		return out, "roam run --on " + req.On, nil
	}
	var nodes []sched.NodeLoad
	for id, p := range a.known {
		if !p.alive {
			continue
		}
		nl := sched.NodeLoad{ID: id, Capacity: p.capacity}
		if id == a.cfg.NodeID {
			nl.Load = a.selfLoad
		} else if e, ok := a.dis.Vector.Get(id); ok {
			nl.Load = e.Load
		}
		nodes = append(nodes, nl)
	}
	out, rr, err := sched.Place(a.placement, nodes, req.Count, a.rng, a.rr)
	a.rr = rr
	return out, "placement " + a.placement, err
}

// startOn starts specs on node (this one or a peer).
func (a *Agent) startOn(node string, specs []job.Spec) ([]startResult, error) {
	req := startRequest{Home: a.cfg.NodeID, HomeAddr: a.peerAddrOf(a.cfg.NodeID), Jobs: specs}
	if node == a.cfg.NodeID {
		return a.startLocal(req), nil
	}
	var res []startResult
	err := a.peerCall(node, http.MethodPost, "/v1/peer/start", req, &res)
	return res, err
}

// startLocal starts jobs on this node for their home.
func (a *Agent) startLocal(req startRequest) []startResult {
	out := make([]startResult, 0, len(req.Jobs))
	var locals []job.Local
	var procs []*job.Proc
	for _, s := range req.Jobs {
		if _, ok := homeOf(s.ID); !ok {
			out = append(out, startResult{ID: s.ID, Error: "bad job id " + strconv.Quote(s.ID)})
			continue
		}
		p, err := a.launcher.Start(s)
		if err != nil {
			out = append(out, startResult{ID: s.ID, Error: err.Error()})
			continue
		}
		l := job.Local{ID: s.ID, Home: req.Home, HomeAddr: req.HomeAddr, PID: p.PID, StartTix: p.StartTix, Dir: p.Dir, Started: time.Now()}
		if s.Pin {
			l.Hold = "pin"
		}
		locals = append(locals, l)
		procs = append(procs, p)
		out = append(out, startResult{ID: s.ID, PID: p.PID})
	}
	if err := a.store.PutLocals(locals...); err != nil {
		a.log.Error("job table", "err", err)
	}
	a.jobs.mu.Lock()
	for i, l := range locals {
		a.jobs.local[l.ID] = &localJob{rec: l, stdin: procs[i].Stdin, ackOut: 0, ackErr: 0}
	}
	a.jobs.mu.Unlock()
	a.kickPusher() // wake the push loop if it slept with no jobs
	a.kickScheduler()
	for _, p := range procs {
		go func(p *job.Proc) {
			_ = p.Cmd.Wait() // reap; the status file says how it ended
			a.kickPusher()
			a.kickScheduler()
		}(p)
	}
	return out
}

func (a *Agent) kickPusher() {
	select {
	case a.jobs.kick <- struct{}{}:
	default:
	}
}

// ---- current node: push output and exit status home ----

// pushLoop pushes news every pushEvery while jobs run here; with none it
// sleeps until a start kicks it, so an idle agent does not wake 20 times a
// second for nothing.
func (a *Agent) pushLoop() {
	defer a.wg.Done()
	t := time.NewTicker(pushEvery)
	defer t.Stop()
	for {
		tick := t.C
		if !a.hasLocalJobs() {
			tick = nil
		}
		select {
		case <-a.stop:
			return
		case <-tick:
		case <-a.jobs.kick:
		}
		a.pushOnce()
	}
}

func (a *Agent) hasLocalJobs() bool {
	a.jobs.mu.Lock()
	defer a.jobs.mu.Unlock()
	return len(a.jobs.local) > 0
}

// pushOnce sends every job's news to its home, one request per home.
func (a *Agent) pushOnce() {
	type batch struct {
		addr string
		ups  []update
	}
	batches := map[string]*batch{}
	a.jobs.mu.Lock()
	for id, lj := range a.jobs.local {
		if lj.migrating {
			continue
		}
		u, send := lj.news()
		if !send {
			continue
		}
		b := batches[lj.rec.Home]
		if b == nil {
			b = &batch{addr: lj.rec.HomeAddr}
			batches[lj.rec.Home] = b
		}
		u.ID = id
		b.ups = append(b.ups, u)
	}
	a.jobs.mu.Unlock()

	for home, b := range batches {
		var acks map[string]ack
		var err error
		if home == a.cfg.NodeID {
			acks = a.takeUpdates(b.ups)
		} else {
			err = a.peerCallAddr(b.addr, http.MethodPost, "/v1/peer/updates", b.ups, &acks)
		}
		if err != nil {
			a.log.Debug("push to home", "home", home, "err", err)
			continue
		}
		a.applyAcks(acks)
	}
}

// news reads what the home does not have yet. Called with jobs.mu held.
func (lj *localJob) news() (update, bool) {
	if lj.ackOut < 0 || lj.ackErr < 0 {
		// After a restart: ask the home what it has first.
		return update{OutOff: -1, ErrOff: -1}, true
	}
	// Read the status before the output: output written before the exit
	// is then surely in the files we read next.
	code, ended := job.ReadStatus(lj.rec.Dir)
	if !ended && !job.Alive(lj.rec.PID, lj.rec.StartTix) {
		if code, ended = job.ReadStatus(lj.rec.Dir); !ended {
			code, ended = 128+int(syscall.SIGKILL), true // killed before it could write
		}
	}
	out, _ := job.ReadSpool(lj.rec.Dir, "stdout", lj.ackOut, pushChunk)
	errb, _ := job.ReadSpool(lj.rec.Dir, "stderr", lj.ackErr, pushChunk)
	u := update{OutOff: lj.ackOut, Out: out, ErrOff: lj.ackErr, Err: errb}
	if ended && len(out) < pushChunk && len(errb) < pushChunk {
		u.Exit = &code
		u.FinalOut = lj.ackOut + int64(len(out))
		u.FinalErr = lj.ackErr + int64(len(errb))
	}
	return u, len(out) > 0 || len(errb) > 0 || u.Exit != nil
}

func (a *Agent) applyAcks(acks map[string]ack) {
	a.jobs.mu.Lock()
	defer a.jobs.mu.Unlock()
	for id, k := range acks {
		lj := a.jobs.local[id]
		if lj == nil {
			continue
		}
		lj.ackOut, lj.ackErr = k.Out, k.Err
		if k.Done {
			if lj.stdin != nil {
				lj.stdin.Close()
			}
			delete(a.jobs.local, id)
			_ = a.store.DeleteLocal(id)
			os.RemoveAll(lj.rec.Dir)
		}
	}
}

// ---- home node: take updates ----

// takeUpdates appends output at its offset (idempotent: a resent piece is
// skipped) and records an exit once all output is in.
func (a *Agent) takeUpdates(ups []update) map[string]ack {
	out := map[string]ack{}
	a.jobs.mu.Lock()
	defer a.jobs.mu.Unlock()
	var finished []job.Record
	for _, u := range ups {
		rec := a.jobs.home[u.ID]
		if rec == nil {
			// Not ours, or forgotten after a failed start: nobody will read it.
			out[u.ID] = ack{Done: true}
			continue
		}
		dir := a.homeSpool(u.ID)
		no := appendAt(filepath.Join(dir, "stdout"), u.OutOff, u.Out)
		ne := appendAt(filepath.Join(dir, "stderr"), u.ErrOff, u.Err)
		done := rec.Over()
		if !done && u.Exit != nil && no == u.FinalOut && ne == u.FinalErr {
			code := *u.Exit
			rec.State, rec.ExitCode, rec.Ended = job.StateFinished, &code, time.Now()
			finished = append(finished, *rec)
			done = true
		}
		out[u.ID] = ack{Out: no, Err: ne, Done: done}
		if ch := a.jobs.wake[u.ID]; ch != nil {
			close(ch)
			delete(a.jobs.wake, u.ID)
		}
	}
	if len(finished) > 0 {
		if err := a.store.PutRecords(finished...); err != nil {
			a.log.Error("job table", "err", err)
		}
	}
	return out
}

// appendAt appends the part of data past the file's end, when data starts
// at or before it, and returns the file's size.
func appendAt(path string, off int64, data []byte) int64 {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0
	}
	size := fi.Size()
	if off >= 0 && off <= size && off+int64(len(data)) > size {
		n, _ := f.Write(data[size-off:])
		size += int64(n)
	}
	return size
}

// ---- home node: output, records ----

// Output returns a home job's output from the given offsets, waiting up to
// wait for news when there is none.
func (a *Agent) Output(id string, outOff, errOff int64, wait time.Duration) (api.Output, error) {
	deadline := time.Now().Add(min(wait, maxWait))
	for {
		a.jobs.mu.Lock()
		rec := a.jobs.home[id]
		if rec == nil {
			a.jobs.mu.Unlock()
			return api.Output{}, errkind.New(ErrNotFound, "unknown job %s", id)
		}
		r := *rec
		ch := a.jobs.wake[id]
		if ch == nil {
			ch = make(chan struct{})
			a.jobs.wake[id] = ch
		}
		a.jobs.mu.Unlock()

		o := api.Output{ID: id, State: r.State, Ended: r.Over(), ExitCode: r.ExitCode}
		o.Stdout, _ = job.ReadSpool(a.homeSpool(id), "stdout", outOff, outputChunk)
		o.Stderr, _ = job.ReadSpool(a.homeSpool(id), "stderr", errOff, outputChunk)
		o.StdoutOff = outOff + int64(len(o.Stdout))
		o.StderrOff = errOff + int64(len(o.Stderr))
		if len(o.Stdout) > 0 || len(o.Stderr) > 0 || o.Ended || time.Now().After(deadline) {
			if len(o.Stdout) > 0 || len(o.Stderr) > 0 {
				// More may be waiting: not ended until it is all read.
				o.Ended, o.ExitCode = false, nil
			}
			return o, nil
		}
		select {
		case <-ch:
		case <-time.After(time.Until(deadline)):
		case <-a.stop:
			return o, nil
		}
	}
}

// record returns a job's home record, from this node or its home.
func (a *Agent) record(id string) (job.Record, error) {
	home, ok := homeOf(id)
	if !ok {
		return job.Record{}, errkind.New(ErrBadRequest, "%q is not a job id (HOMENODE.SEQ)", id)
	}
	if home == a.cfg.NodeID {
		a.jobs.mu.Lock()
		defer a.jobs.mu.Unlock()
		if r := a.jobs.home[id]; r != nil {
			return *r, nil
		}
		return job.Record{}, errkind.New(ErrNotFound, "unknown job %s", id)
	}
	var r job.Record
	err := a.peerCall(home, http.MethodGet, "/v1/peer/record?id="+id, nil, &r)
	return r, err
}

// ---- signals and stdin ----

// Kill delivers a signal to jobs wherever they run; a caller may signal only
// their own jobs, root any.
func (a *Agent) Kill(c Caller, req api.KillRequest) ([]api.KillResult, error) {
	if req.Signal < 1 || req.Signal > 64 {
		return nil, errkind.New(ErrBadRequest, "-s: signal %d is out of range (1 to 64)", req.Signal)
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

func (a *Agent) signalOn(node, id string, sig int) error {
	if node == a.cfg.NodeID {
		return a.signalJob(id, syscall.Signal(sig))
	}
	return a.peerCall(node, http.MethodPost, "/v1/peer/signal", map[string]any{"id": id, "signal": sig}, nil)
}

// signalJob signals a job running here: its roam-init, which forwards the
// signal to the program's process group (SIGKILL ends the namespace).
func (a *Agent) signalJob(id string, sig syscall.Signal) error {
	lj, movedTo := a.settledLocal(id)
	if movedTo != "" {
		return a.signalOn(movedTo, id, int(sig))
	}
	if lj == nil || !job.Alive(lj.rec.PID, lj.rec.StartTix) {
		return errkind.New(ErrNotFound, "job %s is not running on node %s", id, a.cfg.NodeID)
	}
	return syscall.Kill(lj.rec.PID, sig)
}

// settledLocal waits until no migration moves job id, then returns it
// when it runs here, or the node it moved to (for a caller whose record of
// the job's node is older than the move).
func (a *Agent) settledLocal(id string) (*localJob, string) {
	deadline := time.Now().Add(restoreTimeout)
	for {
		a.jobs.mu.Lock()
		lj := a.jobs.local[id]
		movedTo := a.migr.movedTo[id]
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

// Stdin passes bytes to a job's stdin; eof closes it.
func (a *Agent) Stdin(c Caller, id string, data []byte, eof bool) error {
	r, err := a.record(id)
	if err != nil {
		return err
	}
	if !canTouch(c, r.UID) {
		return errkind.New(ErrPermission, "%s: permission denied", id)
	}
	if r.Node == a.cfg.NodeID {
		return a.stdinLocal(id, data, eof)
	}
	q := "/v1/peer/stdin?id=" + id
	if eof {
		q += "&eof=1"
	}
	return a.peerCallRaw(r.Node, q, data)
}

func (a *Agent) stdinLocal(id string, data []byte, eof bool) error {
	lj, movedTo := a.settledLocal(id)
	if movedTo != "" {
		q := "/v1/peer/stdin?id=" + id
		if eof {
			q += "&eof=1"
		}
		return a.peerCallRaw(movedTo, q, data)
	}
	if lj == nil || lj.stdin == nil {
		return errkind.New(ErrNotFound, "job %s takes no stdin here", id)
	}
	if len(data) > 0 {
		if _, err := lj.stdin.Write(data); err != nil {
			return err
		}
	}
	if eof {
		a.jobs.mu.Lock()
		lj.stdin.Close()
		lj.stdin = nil
		a.jobs.mu.Unlock()
	}
	return nil
}

// ---- ps ----

// usage is a running job's resource use on its node.
type usage struct {
	CPUSeconds float64 `json:"cpu_s"`
	RSSMB      float64 `json:"rss_mb"`
}

type psPart struct {
	Records []job.Record     `json:"records"`
	Usage   map[string]usage `json:"usage"`
}

func (a *Agent) psLocal() psPart {
	a.jobs.mu.Lock()
	defer a.jobs.mu.Unlock()
	p := psPart{Usage: map[string]usage{}}
	for _, r := range a.jobs.home {
		p.Records = append(p.Records, *r)
	}
	for id, lj := range a.jobs.local {
		if job.Alive(lj.rec.PID, lj.rec.StartTix) {
			cpu, rss := job.TreeUsage(lj.rec.PID)
			p.Usage[id] = usage{cpu, rss}
		}
	}
	return p
}

// PS lists jobs on every node the caller may see.
func (a *Agent) PS(c Caller, all bool) []api.Job {
	parts := fanOut(a, http.MethodGet, "/v1/peer/ps", nil, a.psLocal)
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
			out = append(out, api.Job{
				ID: r.ID, User: r.User, UID: r.UID, Home: r.Home, Node: r.Node, State: r.State,
				CPUSeconds: u.CPUSeconds, RSSMB: u.RSSMB, Migrations: r.Migrations,
				AgeSeconds: now.Sub(r.Started).Seconds(), Started: r.Started, Ended: r.Ended, Cmd: strings.Join(r.Argv, " "),
				ExitCode: r.ExitCode, Pin: r.Pin, PinReason: r.PinReason, Manual: r.Manual,
				MigrationLog: append([]job.Migration{}, r.MigrationLog...),
			})
		}
	}
	sortJobs(out)
	return out
}

// ---- peer plumbing ----

func (a *Agent) peerAddrOf(node string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p := a.known[node]; p != nil {
		return p.peerAddr
	}
	return ""
}

// peerAddr is a member's peer address, or an error naming the node.
func (a *Agent) peerAddr(node string) (string, error) {
	if addr := a.peerAddrOf(node); addr != "" {
		return addr, nil
	}
	return "", errkind.New(ErrUnavailable, "node %s is not known", node)
}

func (a *Agent) peerCall(node, method, path string, in, out any) error {
	return a.peerCallWithin(peerTimeout, node, method, path, in, out)
}

// peerCallWithin is peerCall with its own time limit.
func (a *Agent) peerCallWithin(d time.Duration, node, method, path string, in, out any) error {
	addr, err := a.peerAddr(node)
	if err != nil {
		return err
	}
	body, err := api.JSONBody(in)
	if err != nil {
		return err
	}
	return a.peerDoWithin(d, addr, method, path, body, out)
}

func (a *Agent) peerCallAddr(addr, method, path string, in, out any) error {
	body, err := api.JSONBody(in)
	if err != nil {
		return err
	}
	return a.peerDo(addr, method, path, body, out)
}

func (a *Agent) peerCallRaw(node, path string, data []byte) error {
	addr, err := a.peerAddr(node)
	if err != nil {
		return err
	}
	return a.peerDo(addr, http.MethodPost, path, bytes.NewReader(data), nil)
}

func (a *Agent) peerDo(addr, method, path string, body io.Reader, out any) error {
	return a.peerDoWithin(peerTimeout, addr, method, path, body, out)
}

func (a *Agent) peerDoWithin(d time.Duration, addr, method, path string, body io.Reader, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "https://"+addr+path, body)
	if err != nil {
		return err
	}
	return a.peerErr(api.Exchange(a.peerHTTP, req, out))
}

// peerErr turns a peer exchange's error into the agent's kinds.
func (a *Agent) peerErr(err error) error {
	var te *api.TransportError
	var re *api.RemoteError
	switch {
	case errors.As(err, &te):
		return errkind.New(ErrUnavailable, "%v", te.Err)
	case errors.As(err, &re):
		return statusError(re.Status, re.Msg)
	}
	return err
}

// statusError turns a peer's error answer back into a sentinel error, so the
// caller's answer keeps its meaning.
func statusError(status int, msg string) error {
	kinds := map[int]error{http.StatusForbidden: ErrPermission, http.StatusNotFound: ErrNotFound,
		http.StatusBadRequest: ErrBadRequest, http.StatusServiceUnavailable: ErrUnavailable,
		http.StatusConflict: ErrPinned}
	if k := kinds[status]; k != nil {
		return errkind.New(k, "%s", msg)
	}
	return errors.New(msg)
}
