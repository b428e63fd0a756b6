package scheduler

// What a round measures: the node's load and memory, and each job's
// runnable threads, memory, system calls and attained service.

import (
	"time"

	"roam/internal/agent/jobtable"
	"roam/internal/agent/rounds"
	"roam/internal/job"
	"roam/internal/migrate"
	"roam/internal/sched"
)

// Snapshot measures the node and its jobs for a round, reading /proc
// with no lock held (memberlist's LocalState must not block on it).
func (s *Scheduler) Snapshot() sched.Snapshot { return s.snapshot(nil) }

// snapshot is Snapshot, with its raw inputs kept in rd when rd is not
// nil (a recorded round, package decisions).
func (s *Scheduler) snapshot(rd *sched.Recorded) sched.Snapshot {
	snap := sched.Snapshot{Now: time.Now()}
	snap.Self = s.self(s.Runnable())
	snap.Self.Least = 0 // the round measures it (Complete)
	if rd == nil {
		snap.Peers = s.c.Members.Peers()
		refs, here := s.c.Jobs.Refs()
		s.SetLeast(s.c.Rounds.Complete(&snap, s.probeJobs(refs), here))
		return snap
	}
	// A recorded round's clock is the wall clock's reading alone, as the
	// record keeps it: with the monotonic reading kept, the round would
	// reckon its times (a job's system calls a second) on another clock
	// than its replay.
	snap.Now = snap.Now.Round(0)
	rd.Node, rd.Now, rd.Self = s.c.Node, snap.Now, snap.Self
	snap.Peers, rd.Vector, rd.Members = s.c.Members.PeerInputs()
	refs, here := s.c.Jobs.Refs()
	rd.Probed, rd.Here = s.probeJobs(refs), here
	rd.Least, rd.Ledger, rd.Prev = s.c.Rounds.CompleteKept(&snap, rd.Probed, here)
	s.SetLeast(rd.Least)
	return snap
}

// decideKept is Members.Decide on a recorded round's snapshot: the
// policy, the snapshot, the draws and the moves go into rd, and rd into
// the record.
func (s *Scheduler) decideKept(pol *sched.Scheduler, snap sched.Snapshot, rd *sched.Recorded) []sched.Move {
	rd.Policy, rd.Snapshot = pol.Text(), snap
	rd.Moves, rd.Draws = s.c.Members.DecideDrawn(pol, snap)
	s.rec.Add(*rd)
	return rd.Moves
}

// probeJobs reads /proc and the jobs' cgroups for every job that runs
// here and is not moving or ending; it takes no lock of the agent's.
func (s *Scheduler) probeJobs(refs []jobtable.JobRef) []rounds.Probed {
	out := make([]rounds.Probed, 0, len(refs))
	for _, r := range refs {
		if r.Migrating || r.Done || !s.c.Procs.Alive(r.Rec.PID, r.Rec.StartTix) {
			continue
		}
		if _, ended := job.ReadStatus(r.Rec.Dir); ended {
			continue
		}
		run, sys, rss := s.c.Procs.Activity(r.Rec.PID)
		j := sched.Job{ID: r.Rec.ID, Started: r.Rec.Started, LastMoved: r.Rec.LastMoved, Moves: r.Rec.Moves, RSSMB: rss, Runnable: run,
			Attained: s.Attained(r.Rec), MemReqMB: r.Rec.Req.MemMB(), CPU: r.Rec.CPU, Within: r.Rec.Within}
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

// Attained is a job's attained service (sched.Job.Attained), the CPU time
// roam ps shows: the CPU seconds it had before this node, and those of its
// processes here (job.Processes.Usage: its cgroup's count, or its process
// tree's; a restored process's count starts again at zero).
func (s *Scheduler) Attained(l job.Local) float64 {
	cpu, _ := s.c.Procs.Usage(l.ID, l.PID)
	return AttainedFrom(cpu, l)
}

// AttainedFrom is Attained with the count here, cpu, read already: what
// it grew by since the copy came (CPUBase), after what the job had before.
func AttainedFrom(cpu float64, l job.Local) float64 {
	return l.Attained(cpu)
}

// CPUHere is the count here of a copy restored just now (job.Local.CPUBase).
func (s *Scheduler) CPUHere(id string, pid int) float64 {
	cpu, _ := s.c.Procs.Usage(id, pid)
	return max(cpu, 0)
}
