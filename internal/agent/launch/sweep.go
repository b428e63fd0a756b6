package launch

// Sweeps at their home: a run's jobs made ready, each index with its
// command (--args-from) and the sweep's settings; a rerun of a sweep's
// failed indices.

import (
	"sort"

	"roam/internal/agent/httpx"
	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/resources"
	"roam/internal/sweep"
)

// plan is a run made ready: the spec its jobs share, the sweep they make
// (zero for a run that is none) and each job's index and command.
type plan struct {
	spec job.Spec
	part job.SweepPart
	jobs []planned
	// within are the only nodes its jobs may run on, each with the CPUs
	// the Slurm job holds there (a Slurm job's); nil: any.
	within map[string]int
}

// planned is one job of a plan: its index, its command, its environment
// when it is not the spec's (a rerun's are each its own), and its
// resource request (the spec's, or its own --mem: SweepRequest.Mems).
type planned struct {
	index int
	argv  []string
	env   []string
	req   resources.Request
}

// isSweep says whether a run makes a sweep: more than one job, or any of
// a sweep's settings.
func isSweep(req api.RunRequest) bool {
	s := req.SweepRequest
	return req.Count > 1 || len(s.Args) > 0 || len(s.Mems) > 0 || s.MaxRunning != 0 || s.Output != "" || s.Error != ""
}

// checkSweep checks a run's sweep settings; each error names its flag.
func checkSweep(req api.RunRequest) error {
	s := req.SweepRequest
	bad := func(f string, a ...any) error { return errkind.New(peer.ErrBadRequest, f, a...) }
	switch {
	case len(s.Args) > 0 && len(s.Args) != req.Count:
		return bad("--args-from: %d lines for -n %d: give one line a job", len(s.Args), req.Count)
	case s.MaxRunning < 0 || s.MaxRunning > req.Count:
		return bad("--max-running: %d is out of range (0 to -n, %d)", s.MaxRunning, req.Count)
	case s.Output != "" && s.Output == s.Error:
		return bad("--output and --error: %q for both; give each stream a file of its own", s.Output)
	}
	if err := sweep.CheckLines("args (--args-from's lines)", s.Args); err != nil {
		return bad("%v", err)
	}
	if err := sweep.CheckFields("args (--args-from's lines)", req.Argv, s.Args); err != nil {
		return bad("%v", err)
	}
	if err := sweep.CheckPattern("--output", s.Output, req.Count); err != nil {
		return bad("%v", err)
	}
	if err := sweep.CheckPattern("--error", s.Error, req.Count); err != nil {
		return bad("%v", err)
	}
	return nil
}

// planRun makes a checked run request ready, each job with its request
// (reqs, one an index; nil: the spec's).
func planRun(spec job.Spec, req api.RunRequest, reqs []resources.Request) plan {
	p := plan{spec: spec}
	// A lone job keeps its --on there too (its ID is "": it is of no
	// sweep), for a start from the queue.
	p.part.On = req.On
	if isSweep(req) {
		s := req.SweepRequest
		p.part = job.SweepPart{Count: req.Count, MaxRunning: s.MaxRunning, On: req.On, Output: s.Output, Error: s.Error}
	}
	for i := range req.Count {
		argv := req.Argv
		if len(req.Args) > 0 {
			argv = sweep.Subst(req.Argv, req.Args[i])
		}
		r := spec.Req
		if reqs != nil {
			r = reqs[i]
		}
		p.jobs = append(p.jobs, planned{index: i, argv: argv, req: r})
	}
	return p
}

// longestArgv is the longest command of a new run: its argv with the
// --args-from line that makes it longest (with {N} repeated, not always
// the longest line).
func longestArgv(req api.RunRequest) []string {
	if len(req.Args) == 0 {
		return req.Argv
	}
	return sweep.Subst(req.Argv, req.Args[sweep.Longest(req.Argv, req.Args)])
}

// longest is the job of a plan with the longest command, which the
// node's limits are held against.
func (p plan) longest() (argv, env []string) {
	best := -1
	for _, j := range p.jobs {
		n := 0
		for _, a := range j.argv {
			n += len(a) + 1
		}
		for _, e := range j.env {
			n += len(e) + 1
		}
		if n > best {
			best, argv, env = n, j.argv, j.env
		}
	}
	if env == nil {
		env = p.spec.Env
	}
	return argv, env
}

// planRerun makes the plan of `roam run --rerun SWEEP`: the failed and
// lost indices of a sweep of this home (or those named), each with the
// command and environment it had, the sweep's working directory and
// patterns, in a new sweep that names the old. Only the sweep's owner
// reruns it: the jobs run as the caller.
func (s *Starter) planRerun(c httpx.Caller, req api.RunRequest) (plan, error) {
	bad := func(f string, a ...any) (plan, error) { return plan{}, errkind.New(peer.ErrBadRequest, f, a...) }
	if len(req.Argv) > 0 || len(req.Args) > 0 || len(req.Mems) > 0 || req.Count > 1 || req.Output != "" || req.Error != "" || req.Stdin {
		return bad("--rerun: it runs the sweep's own commands and requests; give no program, -n, --args-from, --mem {N}, --output or --error")
	}
	ref, err := sweep.ParseRef(req.Rerun)
	if err != nil {
		return bad("--rerun: %v", err)
	}
	if h, _ := sweep.Home(ref.Sweep); h != s.cfg.Self {
		return bad("--rerun: sweep %s has its home on node %s: rerun it there (its records are there)", ref.Sweep, h)
	}
	recs := s.cfg.Jobs.SweepRecords(ref.Sweep, true)
	if len(recs) == 0 {
		return plan{}, errkind.New(peer.ErrNotFound, "--rerun: no sweep %s here", ref.Sweep)
	}
	if recs[0].UID != c.UID {
		return plan{}, errkind.New(peer.ErrPermission, "--rerun: sweep %s is another user's", ref.Sweep)
	}
	again := map[int]bool{}
	if ref.Indices == nil {
		for _, i := range summarize(recs).Again() {
			again[i] = true
		}
	} else {
		for _, i := range ref.Indices {
			again[i] = true
		}
	}
	first := recs[0]
	p := plan{spec: job.Spec{UID: c.UID, GID: c.GID, Groups: c.Groups, Cwd: first.Cwd, Pin: first.Pin, CheckpointEvery: first.CheckpointEvery, Req: first.Req}}
	p.part = first.Sweep
	p.part.ID, p.part.Index, p.part.FileError, p.part.RerunOf = "", 0, "", ref.Sweep
	if req.MaxRunning > 0 {
		p.part.MaxRunning = req.MaxRunning
	}
	p.spec.Req.MemBytes = 0 // the largest of its jobs', below
	for _, r := range recs {
		if again[r.Sweep.Index] {
			p.jobs = append(p.jobs, planned{index: r.Sweep.Index, argv: r.Argv, env: r.Env, req: r.Req})
			p.spec.Req.MemBytes = max(p.spec.Req.MemBytes, r.Req.MemBytes)
			delete(again, r.Sweep.Index)
		}
	}
	switch {
	case len(again) > 0:
		missing := make([]int, 0, len(again))
		for i := range again {
			missing = append(missing, i)
		}
		sort.Ints(missing)
		return bad("--rerun: sweep %s has no index %s", ref.Sweep, sweep.Ranges(missing))
	case len(p.jobs) == 0:
		return bad("--rerun: sweep %s has no failed or lost index to run again (%s)", ref.Sweep, summarize(recs))
	case p.part.MaxRunning > len(p.jobs):
		p.part.MaxRunning = 0
	}
	sort.Slice(p.jobs, func(a, b int) bool { return p.jobs[a].index < p.jobs[b].index })
	return p, nil
}

// summarize is the summary of a sweep's records.
func summarize(recs []job.Record) sweep.Summary {
	ms := make([]sweep.Member, len(recs))
	for i, r := range recs {
		ms[i] = sweep.Member{Index: r.Sweep.Index, State: r.State, Exit: r.ExitCode}
	}
	return sweep.Summarize(ms)
}

// startNow is how many of a new plan's jobs start at once (the lowest
// indices): all but those its --max-running holds back.
func (p plan) startNow() int {
	idx := make([]int, len(p.jobs))
	for i, j := range p.jobs {
		idx[i] = j.index
	}
	return len(sweep.Release(sweep.State{MaxRunning: p.part.MaxRunning, Pending: idx}))
}

// specOf is what a node needs to start a home record's job.
func specOf(r job.Record) job.Spec {
	return job.Spec{ID: r.ID, UID: r.UID, GID: r.GID, Groups: r.Groups, Argv: r.Argv, Env: r.Env, Cwd: r.Cwd, Stdin: r.Stdin, Pin: r.Pin,
		CheckpointEvery: r.CheckpointEvery, Req: r.Req, Slurm: r.Slurm, Within: r.Within}
}
