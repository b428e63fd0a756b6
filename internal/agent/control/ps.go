package control

// `roam ps`: every live node's part, its home jobs' records and its
// running jobs' use, put together for the caller.

import (
	"slices"
	"sort"
	"strings"
	"time"

	"roam/internal/agent/httpx"
	"roam/internal/agent/peer"
	"roam/internal/agent/relay"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/migrate"
	"roam/internal/resources"
	"roam/internal/sched"
	"roam/internal/sweep"
)

// Part is /v1/peer/ps: this node's part of `roam ps`.
func (j *Jobs) Part() peer.PSPart {
	p := peer.PSPart{Usage: map[string]peer.JobUsage{}}
	var locals []job.Local
	p.Records, p.Cut, locals = j.cfg.Jobs.PsView()
	p.Waiting = j.cfg.Jobs.Waiting()
	// /proc and the cgroups are read without the job lock.
	for _, l := range locals {
		if j.cfg.Procs.Alive(l.PID, l.StartTix) {
			// Its CPU time on every node it ran on, as if it had run here
			// all along (the user sees the job as local).
			cpu, rss := j.cfg.Procs.Usage(l.ID, l.PID)
			p.Usage[l.ID] = peer.JobUsage{CPUSeconds: j.cfg.Attained(cpu, l), RSSMB: rss, Stopped: j.cfg.Procs.Stopped(l.PID)}
		}
	}
	return p
}

// MaxPSFull bounds the jobs one `roam ps` lists with their whole
// command lines: each is a call to its home, and megabytes.
const MaxPSFull = 64

// PS lists jobs on every node the caller may see; those of full (at most
// MaxPSFull) with their whole command lines, from their homes.
func (j *Jobs) PS(c httpx.Caller, all bool, full ...string) ([]api.Job, error) {
	if len(full) > MaxPSFull {
		return nil, errkind.New(peer.ErrBadRequest, "id: %d jobs asked by id, more than %d", len(full), MaxPSFull)
	}
	parts := j.cfg.Parts()
	use := map[string]peer.JobUsage{}
	waiting := map[string]string{}
	cut := map[string]bool{}
	for _, p := range parts {
		for _, id := range p.Cut {
			cut[id] = true
		}
		for id, u := range p.Usage {
			use[id] = u
		}
		for key, why := range p.Waiting {
			waiting[key] = relay.LimitText(why)
		}
	}
	now := time.Now()
	out := []api.Job{}
	for _, p := range parts {
		for _, r := range p.Records {
			if !c.MayAct(r.UID) || (!all && r.UID != c.UID) {
				continue
			}
			u := use[r.ID]
			state := r.State
			if state == api.StateRunning && u.Stopped {
				state = api.StateStopped
			}
			row := api.Job{
				ID: r.ID, User: r.User, UID: r.UID, Home: r.Home, Node: r.Node, State: state,
				CPUSeconds: u.CPUSeconds, RSSMB: u.RSSMB, Migrations: r.Migrations,
				AgeSeconds: now.Sub(r.Started).Seconds(), Started: r.Started, Ended: r.Ended, LostAt: r.LostAt,
				Cmd: strings.Join(r.Argv, " "), CmdCut: cut[r.ID],
				ExitCode: r.ExitCode, EndReason: r.EndReason, OutputCut: r.OutputCut, Pin: r.Pin, PinReason: r.PinReason, Manual: r.Manual,
				MigrationLog:    append([]job.Migration{}, r.MigrationLog...),
				CheckpointEvery: r.CheckpointEvery, Checkpoints: slices.Clone(r.Checkpoints), Restarts: slices.Clone(r.Restarts),
				CPUs: float64(r.Req.MilliCPUs) / resources.MilliPerCPU, MemBytes: r.Req.MemBytes,
				JobSweep: jobSweep(r, pendingWhy(r, waiting)), Accounting: accounting(r),
			}
			if r.Over() || r.State == job.StatePending && !r.Preempted.IsZero() {
				// Ended, or preempted: what it had, on every node.
				row.CPUSeconds, row.RSSMB = r.Used.CPUSeconds, 0
			}
			out = append(out, row)
		}
	}
	sortJobs(out)
	return out, j.wholeCmds(out, full)
}

// wholeCmds puts the whole command lines of the jobs of full in their
// rows, from their records at their homes.
func (j *Jobs) wholeCmds(rows []api.Job, full []string) error {
	want := map[string]bool{}
	for _, id := range full {
		want[id] = true
	}
	for i := range rows {
		if !want[rows[i].ID] || !rows[i].CmdCut {
			continue
		}
		r, err := j.Record(rows[i].ID)
		if err != nil {
			return err
		}
		rows[i].Cmd, rows[i].CmdCut = strings.Join(r.Argv, " "), false
	}
	return nil
}

// sortJobs orders jobs by their home, then their number there.
func sortJobs(js []api.Job) {
	sort.Slice(js, func(i, j int) bool {
		hi, si, _ := migrate.JobSeq(js[i].ID)
		hj, sj, _ := migrate.JobSeq(js[j].ID)
		if hi != hj {
			return sched.IDLess(hi, hj)
		}
		return si < sj
	})
}

// jobSweep is a record's place in its sweep, as roam ps shows it: the
// files its output goes to, as the patterns name them; and why it waits,
// when it is pending (a lone job too).
func jobSweep(r job.Record, why string) api.JobSweep {
	p := r.Sweep
	if p.ID == "" {
		return api.JobSweep{PendingWhy: why}
	}
	idx := p.Index
	js := api.JobSweep{Sweep: p.ID, Index: &idx, PendingWhy: why, FileError: p.FileError}
	v := sweep.Values{Sweep: p.ID, Job: r.ID, Index: p.Index}
	if p.Output != "" {
		js.OutputFile = sweep.Expand(p.Output, r.Cwd, v)
	}
	if p.Error != "" {
		js.ErrorFile = sweep.Expand(p.Error, r.Cwd, v)
	}
	return js
}

// accounting is what an ended job used (api.Accounting): what its last
// node counted, the time from its start to its end, and the nodes it ran
// on (RanOn).
func accounting(r job.Record) api.Accounting {
	if !r.Over() {
		return api.Accounting{}
	}
	a := api.Accounting{PeakMB: r.Used.PeakMB, Nodes: RanOn(r)}
	if !r.Ended.IsZero() {
		a.ElapsedSeconds = max(r.Ended.Sub(r.Started).Seconds(), 0)
	}
	return a
}

// RanOn is the nodes a job ran on, in order, from its record: the node
// its first committed move left (or where it is, with none), each move's
// destination and each restart's node. A record keeps the newest
// job.MaxMigrationLog moves: the oldest nodes of a job moved more often
// are not named.
func RanOn(r job.Record) []string {
	var out []string
	add := func(n string) {
		if n != "" && (len(out) == 0 || out[len(out)-1] != n) {
			out = append(out, n)
		}
	}
	type step struct {
		at       time.Time
		from, to string
	}
	var steps []step
	for _, m := range r.MigrationLog {
		if m.OK {
			steps = append(steps, step{m.At, m.From, m.To})
		}
	}
	for _, rs := range r.Restarts {
		steps = append(steps, step{rs.At, "", rs.Node})
	}
	sort.SliceStable(steps, func(i, j int) bool { return steps[i].at.Before(steps[j].at) })
	for _, s := range steps {
		add(s.from)
		add(s.to)
	}
	if len(out) == 0 {
		add(r.Node)
	}
	return out
}
