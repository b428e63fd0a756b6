package agent

// The job table: jobs whose home is this node and jobs running on it,
// finding a job's record, signals (`roam kill`) and `roam ps`. Starting
// jobs is in run.go, their output and stdin in relay.go.

import (
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"roam/internal/agent/jobtable"
	"roam/internal/agent/peer"
	"roam/internal/agent/scheduler"
	"roam/internal/agent/spool"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/job"
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
	// startBatch bounds the JSON of one start request's specs, below the
	// maxBody a peer reads (jobtable.PushBatch does so for a push).
	startBatch = maxBody / 2
)

// openJobs opens the job table and reloads what an earlier run left.
func (a *Agent) openJobs() error {
	st, err := job.Open(filepath.Join(a.cfg.StateDir, "state.db"))
	if err != nil {
		return err
	}
	a.store = st
	a.spools = spool.New(filepath.Join(a.cfg.StateDir, "home"), rankSpool)
	a.jobs = jobtable.New(st, a.spools, rankJobs)
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
	a.jobs.Load(recs, locals, time.Now())
	a.log.Info("job table loaded", "home_jobs", len(recs), "local_jobs", len(locals))
	return nil
}

// jobSeq is a job id's home node and sequence number (HOMENODE.SEQ).
func jobSeq(id string) (string, uint64, bool) {
	home, ok := migrate.JobHome(id)
	if !ok {
		return "", 0, false
	}
	seq, err := strconv.ParseUint(id[len(home)+1:], 10, 64)
	return home, seq, err == nil
}

func canTouch(c Caller, uid uint32) bool { return c.UID == 0 || c.UID == uid }

// record returns a job's record from its home node (this one or another).
func (a *Agent) record(id string) (job.Record, error) {
	home, ok := migrate.JobHome(id)
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
	l, here, movedTo := a.settledLocal(id)
	if movedTo != "" {
		return a.signalOn(movedTo, id, int(sig))
	}
	if !here || !a.procs.Alive(l.PID, l.StartTix) {
		return errkind.New(peer.ErrNotFound, "job %s is not running on node %s", id, a.cfg.NodeID)
	}
	return a.procs.Signal(l.PID, sig)
}

// settledLocal waits until no migration moves job id, then returns it
// when it runs here, or the node it moved to (for a caller whose record of
// the job's node is older than the move).
func (a *Agent) settledLocal(id string) (l job.Local, here bool, movedTo string) {
	deadline := time.Now().Add(restoreTimeout)
	for {
		l, here, busy, movedTo := a.jobs.WhereIs(id, a.migr)
		if !busy || time.Now().After(deadline) {
			return l, here, movedTo
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
	p := psPart{Usage: map[string]usage{}}
	var locals []job.Local
	p.Records, locals = a.jobs.PsView()
	// /proc and the cgroups are read without the job lock.
	for _, l := range locals {
		if a.procs.Alive(l.PID, l.StartTix) {
			// Its CPU time on every node it ran on, as if it had run here
			// all along (the user sees the job as local).
			cpu, rss := a.procs.Usage(l.ID, l.PID)
			p.Usage[l.ID] = usage{scheduler.AttainedFrom(cpu, l), rss, a.procs.Stopped(l.PID)}
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
