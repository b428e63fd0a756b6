package agent

// The scheduler's I/O: its probes (the node's load and memory, each job's
// runnable threads, memory and system calls), the rounds of the policy's
// pure decisions (internal/sched), the migrations those decide, and the
// destination's admission of a policy's move. The policy itself is in
// policy.go, the events that say why in events.go.

import (
	"fmt"
	"math"
	"net/http"
	"time"

	"roam/internal/agent/jobtable"
	"roam/internal/agent/peer"
	"roam/internal/agent/rounds"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/migrate"
	"roam/internal/sched"
)

// admitResponse is the destination's answer to a policy's move.
type admitResponse struct {
	// Refused says why the destination will not take it; empty: taken.
	Refused string `json:"refused,omitempty"`
	// Load, MemFreeMB and Least are the destination's now, admitted
	// moves counted in: fresher than the source's load vector.
	Load      float64 `json:"load"`
	MemFreeMB float64 `json:"mem_free_mb"`
	Least     float64 `json:"least,omitempty"`
}

// admit is the destination's side of a policy's move: the ledger judges
// it against this node's load now, the moves it admitted and has not yet
// received counted in (sched.Ledger.Admit).
func (a *Agent) admit(mv sched.Move) (admitResponse, error) {
	if mv.Job == "" || mv.To != a.cfg.NodeID {
		return admitResponse{}, errkind.New(peer.ErrBadRequest, "move of job %q to node %q: not a move to node %s", mv.Job, mv.To, a.cfg.NodeID)
	}
	if err := mv.Check(); err != nil {
		return admitResponse{}, errkind.New(peer.ErrBadRequest, "%v", err)
	}
	runnable, mem := a.runnable(), a.prober.MemFreeMB()
	now := time.Now()
	self := sched.Node{ID: a.cfg.NodeID, Capacity: a.capacity, Load: float64(runnable) / a.capacity, MemFreeMB: mem, Draining: a.draining.Load(), Least: a.least()}
	ans, pending := a.rounds.Admit(mv, self, now)
	r := admitResponse{Load: ans.Load, MemFreeMB: ans.MemFreeMB, Least: ans.Least}
	if ans.Refused != nil {
		r.Refused = fmt.Sprintf("%v (%d runnable threads here, %d admitted moves not arrived)", ans.Refused, runnable, pending)
	}
	return r, nil
}

// withdrawAdmission is DELETE /v1/peer/migrate/admit: the source of an
// admitted move gave it up before sending anything, and the place held
// for its job ends now rather than after sched.AdmitHold (only that
// admission: sched.Ledger.Withdrawn). It says whether it ended one.
func (a *Agent) withdrawAdmission(mv sched.Move) (withdrawResponse, error) {
	if mv.Job == "" || mv.To != a.cfg.NodeID {
		return withdrawResponse{}, errkind.New(peer.ErrBadRequest, "withdrawal of the move of job %q to node %q: not a move to node %s", mv.Job, mv.To, a.cfg.NodeID)
	}
	return withdrawResponse{Ended: a.rounds.Withdrawn(mv)}, nil
}

type withdrawResponse struct {
	Ended bool `json:"ended"`
}

// runnable is how many threads are runnable on this node now, its jobs'
// roam-init processes left out: they only wait for their children, but
// one just restored or started is runnable until it gets a CPU, which a
// throttled node gives it only at its next period (probe.Node.Runnable).
func (a *Agent) runnable() int { return a.prober.Runnable(a.jobs.Inits()) }

// move carries out one move of a round: the destination's admission,
// then the migration; it says whether the job moved.
func (a *Agent) move(mv sched.Move) bool {
	var ar admitResponse
	if err := a.peers.Call(mv.To, http.MethodPost, peer.MigrateAdmit, mv, &ar); err == nil && ar.Refused != "" {
		p, _ := a.members.Get(mv.To)
		a.rounds.Declined(mv, sched.Node{ID: mv.To, Capacity: p.Capacity, Load: ar.Load, MemFreeMB: ar.MemFreeMB, Least: ar.Least}, time.Now())
		a.event(api.Event{Kind: "declined", Job: mv.Job, UID: a.jobs.Owner(mv.Job), From: a.cfg.NodeID, To: mv.To, Why: mv.Why + "; declined by node " + mv.To + ": " + ar.Refused})
		return false
	}
	m, err := a.out.MigrateOut(peer.MigrateOutRequest{ID: mv.Job, To: mv.To, Why: mv.Why, Lazy: mv.Lazy})
	e := api.Event{Kind: "migrate", Job: mv.Job, UID: a.jobs.Owner(mv.Job), From: a.cfg.NodeID, To: mv.To, Why: mv.Why, FreezeMS: m.FreezeMS}
	if err != nil {
		a.withdraw(mv)
		a.rounds.Failed(mv, time.Now())
		e.Kind, e.Why = "failed", mv.Why+"; failed: "+err.Error()
		if reason, pinned := migrate.PinReason(err); pinned {
			a.jobs.SetUnmovable(mv.Job, reason)
		}
	}
	a.event(e)
	return err == nil
}

// withdraw tells mv's destination, in the background, that this node gave
// the move up: a move that failed before its stream reached the
// destination (the job was found pinned, or had ended) left a place held
// there that made the node refuse work, and look busy to every peer, for
// sched.AdmitHold. After a later failure the destination has ended the
// admission itself, and this ends nothing. The withdrawal names the
// decision (its time), so a later admission of the job stays.
func (a *Agent) withdraw(mv sched.Move) {
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		if err := a.peers.Call(mv.To, http.MethodDelete, peer.MigrateAdmit, mv, nil); err != nil {
			a.log.Debug("withdraw an admission", "job", mv.Job, "node", mv.To, "err", err)
		}
	}()
}

// snapshot measures the node and its jobs for a round, reading /proc
// with no lock held (memberlist's LocalState must not block on it).
func (a *Agent) snapshot() sched.Snapshot {
	s := sched.Snapshot{Now: time.Now()}
	runnable := a.runnable()
	s.Self = sched.Node{ID: a.cfg.NodeID, Capacity: a.capacity, Load: float64(runnable) / a.capacity, MemFreeMB: a.prober.MemFreeMB(), Draining: a.draining.Load()}
	s.Peers = a.members.Peers()
	refs, here := a.jobs.Refs()
	least := a.rounds.Complete(&s, a.probeJobs(refs), here)
	a.selfLeast.Store(math.Float64bits(least))
	return s
}

// probeJobs reads /proc and the jobs' cgroups for every job that runs
// here and is not moving or ending; it takes no lock of the agent's.
func (a *Agent) probeJobs(refs []jobtable.JobRef) []rounds.Probed {
	out := make([]rounds.Probed, 0, len(refs))
	for _, r := range refs {
		if r.Migrating || r.Done || !a.procs.Alive(r.Rec.PID, r.Rec.StartTix) {
			continue
		}
		if _, ended := job.ReadStatus(r.Rec.Dir); ended {
			continue
		}
		run, sys, rss := a.procs.Activity(r.Rec.PID)
		j := sched.Job{ID: r.Rec.ID, Started: r.Rec.Started, LastMoved: r.Rec.LastMoved, Moves: r.Rec.Moves, RSSMB: rss, Runnable: run,
			Attained: a.attained(r.Rec)}
		switch {
		case r.Rec.Hold == migrate.HoldPin:
			j.Held = "pinned (run --pin)"
		case r.Unmovable != "":
			j.Held = r.Unmovable // a drain does not try it again either
		case r.Rec.Hold == migrate.HoldManual:
			j.Held, j.Manual = "placed by hand", true
		}
		out = append(out, rounds.Probed{Job: j, Runnable: run, Syscalls: sys})
	}
	return out
}

// attained is a job's attained service (sched.Job.Attained), the CPU time
// roam ps shows: the CPU seconds it had before this node, and those of its
// processes here (job.Processes.Usage: its cgroup's count, or its process
// tree's; a restored process's count starts again at zero).
func (a *Agent) attained(l job.Local) float64 {
	cpu, _ := a.procs.Usage(l.ID, l.PID)
	return attainedFrom(cpu, l)
}

// attainedFrom is attained with the count here, cpu, read already: what
// it grew by since the copy came (CPUBase), after what the job had before.
func attainedFrom(cpu float64, l job.Local) float64 {
	return min(max(l.CPUBefore, 0)+max(cpu-l.CPUBase, 0), migrate.MaxCPUBefore)
}

// cpuHere is the count here of a copy restored just now (job.Local.CPUBase).
func (a *Agent) cpuHere(id string, pid int) float64 {
	cpu, _ := a.procs.Usage(id, pid)
	return max(cpu, 0)
}

// releaseHold hands a job placed by hand back to the policies.
func (a *Agent) releaseHold(id string) error {
	found, err := a.jobs.ReleaseHold(id)
	if !found {
		return errkind.New(peer.ErrNotFound, "job %s is not running on node %s", id, a.cfg.NodeID)
	}
	if err != nil {
		a.log.Error("job table", "err", err)
	}
	a.rounds.Kick()
	return nil
}

// ---- routes ----
