package agent

// `roam run`: the home node checks the request, places each process,
// keeps the records and has each chosen node start its share.

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/agent/spool"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/migrate"
)

// startRequest is a home node asking a node to start jobs.
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

// Run starts a `roam run` request from caller; this node is the home.
func (a *Agent) Run(c Caller, req api.RunRequest) (api.RunResponse, error) {
	spec, err := runSpec(c, req)
	if err != nil {
		return api.RunResponse{}, err
	}
	if err := a.checkRunLimits(c, req); err != nil {
		return api.RunResponse{}, err
	}
	targets, why, err := a.members.Place(req.On, req.Count, a.drain.On())
	if err != nil {
		return api.RunResponse{}, err
	}
	recs, byNode, err := a.newHomeRecords(c, req, spec, targets, why)
	if err != nil {
		return api.RunResponse{}, err
	}
	if err := a.startAll(byNode); err != nil {
		a.jobs.ForgetHome(recs)
		return api.RunResponse{}, err
	}
	if err := a.jobs.MarkRunning(recs); err != nil {
		return api.RunResponse{}, err
	}
	resp := api.RunResponse{Nodes: targets}
	for _, r := range recs {
		resp.IDs = append(resp.IDs, r.ID)
	}
	return resp, nil
}

// checkRunLimits refuses a run past one of the node's limits (the
// caller's live jobs and stored output at this home included). Root's runs
// are bounded too: its jobs cost the same.
func (a *Agent) checkRunLimits(c Caller, req api.RunRequest) error {
	live, ended := a.jobs.UserJobs(c.UID)
	// Only ended jobs' output counts: a live one is bounded by
	// output_bytes, and stat'ing it is what the disk would feel.
	var used int64
	for _, id := range ended {
		used += spool.Size(a.spools.Dir(id))
	}
	if err := a.cfg.Limits.CheckRun(req.Count, req.Argv, req.Env, live, used); err != nil {
		return errkind.New(peer.ErrLimit, "%v", err)
	}
	return nil
}

// runSpec checks a run request and makes the spec its processes share.
func runSpec(c Caller, req api.RunRequest) (job.Spec, error) {
	switch {
	case req.Count < 1:
		return job.Spec{}, errkind.New(peer.ErrBadRequest, "-n: %d is below 1", req.Count)
	case len(req.Argv) == 0:
		return job.Spec{}, errkind.New(peer.ErrBadRequest, "no program given")
	case req.Stdin && req.Count != 1:
		return job.Spec{}, errkind.New(peer.ErrBadRequest, "stdin goes to a single process only (-n 1)")
	}
	if !migrate.ValidEvery(req.CheckpointEvery) {
		return job.Spec{}, errkind.New(peer.ErrBadRequest, "--checkpoint-every: %v is out of range (%v to %v)", req.CheckpointEvery, migrate.MinCheckpointEvery, migrate.MaxCheckpointEvery)
	}
	spec := job.Spec{UID: c.UID, GID: c.GID, Groups: c.Groups, Argv: req.Argv, Env: req.Env, Cwd: req.Cwd, Stdin: req.Stdin, Pin: req.Pin,
		CheckpointEvery: req.CheckpointEvery}
	if err := job.Check(spec); err != nil {
		return job.Spec{}, errkind.New(peer.ErrBadRequest, "%v", err)
	}
	return spec, nil
}

// newHomeRecords numbers the processes, one per target, and keeps their
// records, starting, before any starts: output that arrives at once finds
// its job. It returns the records and each node's specs.
func (a *Agent) newHomeRecords(c Caller, req api.RunRequest, spec job.Spec, targets []string, why string) ([]job.Record, map[string][]job.Spec, error) {
	first, err := a.store.NextSeqs(req.Count)
	if err != nil {
		return nil, nil, err
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
			Cwd: req.Cwd, Home: a.cfg.NodeID, Node: node, Stdin: req.Stdin, Pin: req.Pin, CheckpointEvery: req.CheckpointEvery,
			State: job.StateStarting, Started: now, Group: fmt.Sprintf("%s.%d", a.cfg.NodeID, first),
		})
		a.event(api.Event{At: now, Kind: "place", Job: s.ID, UID: &c.UID, To: node, Why: why})
	}
	// The ids are taken in one step of the job table, so that a restart
	// that needs one of them (reopen) sees it taken; an id a record holds
	// already (the table's sequence behind its records) is not written
	// over.
	id, err := a.jobs.AddHome(recs)
	switch {
	case err != nil:
		return nil, nil, err
	case id != "":
		return nil, nil, errkind.New(peer.ErrUnavailable, "job id %s is another job's: this node's job sequence is behind its records", id)
	}
	// The spools outside the lock: -n 10000 is as many directories.
	for i := range recs {
		_ = a.spools.Make(recs[i].ID)
	}
	return recs, byNode, nil
}

// startAll starts every node's specs at once (each node starts its share
// in turn). When any fails to start, it kills those that did and returns
// the first error. A node whose answer never came may have started its
// share: those are killed too, by id. Should that node be out of reach
// now, its next heartbeat finds the home without their records and it
// ends them itself (ack.Gone), so nothing of a failed run is left.
func (a *Agent) startAll(byNode map[string][]job.Spec) error {
	type result struct {
		node string
		res  []startResult
		err  error
	}
	results := make(chan result, len(byNode))
	for node, specs := range byNode {
		go func() {
			res, err := a.startOn(node, specs)
			results <- result{node, res, err}
		}()
	}
	type started struct{ node, id string }
	var ok []started
	var firstErr error
	for range byNode {
		r := <-results
		if r.err != nil && firstErr == nil {
			firstErr = fmt.Errorf("node %s: %w", r.node, r.err)
		}
		if r.err != nil {
			answered := map[string]bool{}
			for _, x := range r.res {
				answered[x.ID] = true
			}
			for _, s := range byNode[r.node] {
				if !answered[s.ID] {
					ok = append(ok, started{r.node, s.ID})
				}
			}
		}
		for _, x := range r.res {
			if x.Error != "" && firstErr == nil {
				firstErr = fmt.Errorf("node %s: %s", r.node, x.Error)
			}
			if x.Error == "" {
				ok = append(ok, started{r.node, x.ID})
			}
		}
	}
	if firstErr != nil {
		// Leave nothing behind: end what did start, where it started, all
		// at once (a node that hangs holds up only its own kills).
		var wg sync.WaitGroup
		for _, s := range ok {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = a.signalOn(s.node, s.id, int(syscall.SIGKILL))
			}()
		}
		wg.Wait()
	}
	return firstErr
}

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

func userName(uid uint32) string {
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		return u.Username
	}
	return strconv.FormatUint(uint64(uid), 10)
}

// startOn has node (this one or a peer) start specs, in requests no larger
// than a peer reads (startBatch), one after the other. On an error it
// returns the results of the requests before it.
func (a *Agent) startOn(node string, specs []job.Spec) ([]startResult, error) {
	var out []startResult
	for len(specs) > 0 {
		n := startBatchLen(specs)
		req := startRequest{Home: a.cfg.NodeID, HomeAddr: a.peers.SelfAddr, Jobs: specs[:n]}
		var res []startResult
		if err := a.peers.Call(node, http.MethodPost, peer.Start, req, &res); err != nil {
			return out, err
		}
		out = append(out, res...)
		specs = specs[n:]
	}
	return out, nil
}

// startBatchLen is how many of specs, at least one, take no more than
// startBatch bytes of JSON.
func startBatchLen(specs []job.Spec) int {
	size := 0
	for i, s := range specs {
		b, _ := json.Marshal(s)
		size += len(b) + 1
		if size > startBatch && i > 0 {
			return i
		}
	}
	return len(specs)
}

// startLocal starts jobs on this node for their home.
func (a *Agent) startLocal(req startRequest) []startResult {
	out := make([]startResult, 0, len(req.Jobs))
	var locals []job.Local
	var procs []*job.Proc
	// Job ids name spool directories and cgroups: HOME.SEQ with HOME a
	// node id, and HOME the requester's.
	_, addrErr := netip.ParseAddrPort(req.HomeAddr)
	draining := a.drain.On()
	for _, s := range req.Jobs {
		if draining {
			out = append(out, startResult{ID: s.ID, Error: "node " + a.cfg.NodeID + " is draining: it starts no job"})
			continue
		}
		if h, ok := migrate.JobHome(s.ID); !ok || h != req.Home {
			out = append(out, startResult{ID: s.ID, Error: "bad job id " + strconv.Quote(s.ID) + " for home " + strconv.Quote(req.Home)})
			continue
		}
		if addrErr != nil {
			out = append(out, startResult{ID: s.ID, Error: "bad home address " + strconv.Quote(req.HomeAddr)})
			continue
		}
		p, err := a.procs.Start(s)
		if err != nil {
			out = append(out, startResult{ID: s.ID, Error: err.Error()})
			continue
		}
		l := job.Local{ID: s.ID, Home: req.Home, HomeAddr: req.HomeAddr, UID: s.UID, GID: s.GID, Groups: s.Groups, PID: p.PID, StartTix: p.StartTix, Dir: p.Dir, Started: time.Now(),
			CheckpointEvery: s.CheckpointEvery}
		if s.Pin {
			l.Hold = migrate.HoldPin
		}
		locals = append(locals, l)
		procs = append(procs, p)
		out = append(out, startResult{ID: s.ID, PID: p.PID})
	}
	stdins := make([]*os.File, len(procs))
	for i, p := range procs {
		stdins[i] = p.Stdin
	}
	if err := a.jobs.AddLocals(locals, stdins, time.Now()); err != nil {
		a.log.Error("job table", "err", err)
	}
	a.jobs.KickPush() // wake the push loop if it slept with no jobs
	a.rounds.Kick()
	for _, p := range procs {
		go func(p *job.Proc) {
			_ = p.Wait() // reap; the status file says how it ended
			a.jobs.KickPush()
			a.rounds.Kick()
		}(p)
	}
	return out
}
