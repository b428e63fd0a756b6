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
	"sync"
	"sync/atomic"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/lockorder"
	"roam/internal/migrate"
	"roam/internal/sched"
)

// schedState is the scheduler's state in the agent.
type schedState struct {
	kick chan struct{}
	mu   lockorder.Mutex // guards everything below
	pol  *sched.Scheduler
	// polVer is pol's version: each `roam policy load` takes the highest
	// this node knows plus one; 0 while it is the config file's. Nodes
	// gossip their policy, and the highest version wins (policyNewer): a
	// node that was down or joins later takes the cluster's policy (see
	// gossip.go). A version, not a wall-clock time: a node whose clock is
	// ahead, or a far-future time from the network, would otherwise win
	// over every later load. polAt is when it was loaded, for people.
	polVer uint64
	polAt  time.Time
	// ledger is the rounds' memory: admissions, heard loads, recent
	// moves, failed moves, and whether a round's moves still run.
	ledger sched.Ledger
	// wake is when the last round's snapshot has a job come of age
	// (sched.Scheduler.Wake): a round runs then.
	wake time.Time
	// prev are the jobs' system call counts at the last round.
	prev   map[string]ioSample
	events []api.Event
}

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
	a.sch.mu.Lock()
	ans := a.sch.ledger.Admit(mv, self, now)
	pending := a.sch.ledger.Pending(now, mv.Job)
	a.sch.mu.Unlock()
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
	a.sch.mu.Lock()
	ended := a.sch.ledger.Withdrawn(mv)
	a.sch.mu.Unlock()
	return withdrawResponse{Ended: ended}, nil
}

type withdrawResponse struct {
	Ended bool `json:"ended"`
}

// runnable is how many threads are runnable on this node now, its jobs'
// roam-init processes left out: they only wait for their children, but
// one just restored or started is runnable until it gets a CPU, which a
// throttled node gives it only at its next period (probe.Node.Runnable).
func (a *Agent) runnable() int {
	a.jobs.mu.Lock()
	inits := make(map[int]uint64, len(a.jobs.local))
	for _, j := range a.jobs.local {
		if j.rec.PID > 0 {
			inits[j.rec.PID] = j.rec.StartTix
		}
	}
	a.jobs.mu.Unlock()
	return a.prober.Runnable(inits)
}

// arrived ends the admission of job id's move here: it runs here now (and
// the probe counts it), or its move failed (sched.Ledger.Arrived).
func (a *Agent) arrived(id string) {
	a.sch.mu.Lock()
	a.sch.ledger.Arrived(id)
	a.sch.mu.Unlock()
}

type ioSample struct {
	at       time.Time
	syscalls uint64
}

func (a *Agent) kickScheduler() {
	select {
	case a.sch.kick <- struct{}{}:
	default:
	}
}

// schedLoop runs the rounds, when the ledger's pacing says: each period
// of the policy, and on a kick (a job starts or ends, moves went through)
// if the policy has a passive (jobs) probe.
//
// The period counts from the last round (or the last period or wake that
// ran none), not from a kick that ran none: an active policy runs no
// round on a kick, and kicks come often (a peer's load, a job's start or
// end), so counting from each would put its rounds off for good.
func (a *Agent) schedLoop() {
	defer a.wg.Done()
	from := time.Now()
	for {
		a.sch.mu.Lock()
		next := a.sch.ledger.NextRound(from, time.Duration(a.sch.pol.Policy.Period), a.sch.wake)
		a.sch.mu.Unlock()
		t := time.NewTimer(time.Until(next))
		tr := sched.ByPeriod
		select {
		case <-a.stop:
			t.Stop()
			return
		case <-t.C:
		case <-a.sch.kick:
			t.Stop()
			tr = sched.ByKick
		}
		a.sch.mu.Lock()
		pol := a.sch.pol
		due := a.sch.ledger.RoundDue(tr, pol.Passive())
		a.sch.mu.Unlock()
		if due {
			a.round(pol)
		}
		if due || tr == sched.ByPeriod {
			from = time.Now()
		}
	}
}

// round takes a snapshot, decides, and starts the moves in the
// background, which the ledger records (Started, Finished): the moves to
// one node one after the other, those to different nodes side by side, up
// to the policy's parallel (sched.Lanes). Only schedLoop calls it: no
// other round starts between RoundDue and Started.
func (a *Agent) round(pol *sched.Scheduler) {
	snap := a.snapshot()
	moves := a.members.Decide(pol, snap)
	a.sch.mu.Lock()
	a.sch.wake = pol.Wake(snap)
	a.sch.ledger.Started(moves) // none: nothing runs
	a.sch.mu.Unlock()
	if len(moves) == 0 {
		return
	}
	lanes := sched.Lanes(moves, pol.Parallel())
	var moved atomic.Bool
	var wg sync.WaitGroup
	for _, lane := range lanes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, mv := range lane {
				select {
				case <-a.stop:
					return
				default:
				}
				if a.move(mv) {
					moved.Store(true)
				}
			}
		}()
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		wg.Wait()
		a.sch.mu.Lock()
		again := a.sch.ledger.Finished(moved.Load(), time.Now(), a.sch.wake)
		a.sch.mu.Unlock()
		if again {
			a.kickScheduler()
		}
	}()
}

// move carries out one move of a round: the destination's admission,
// then the migration; it says whether the job moved.
func (a *Agent) move(mv sched.Move) bool {
	var ar admitResponse
	if err := a.peers.Call(mv.To, http.MethodPost, peer.MigrateAdmit, mv, &ar); err == nil && ar.Refused != "" {
		now := time.Now()
		p, _ := a.members.Get(mv.To)
		capacity := p.Capacity
		a.sch.mu.Lock()
		a.sch.ledger.Forget(mv)
		least := ar.Least
		if !(least >= 0 && least <= sched.MaxCPUSeconds) {
			least = 0 // a peer's answer: what no node sends counts as unsaid
		}
		a.sch.ledger.Declined(mv, sched.Node{ID: mv.To, Capacity: capacity, Load: ar.Load, MemFreeMB: ar.MemFreeMB, Least: least}, now)
		a.sch.mu.Unlock()
		a.event(api.Event{Kind: "declined", Job: mv.Job, UID: a.localOwner(mv.Job), From: a.cfg.NodeID, To: mv.To, Why: mv.Why + "; declined by node " + mv.To + ": " + ar.Refused})
		return false
	}
	m, err := a.migrateOut(migrateOutRequest{ID: mv.Job, To: mv.To, Why: mv.Why, Lazy: mv.Lazy})
	e := api.Event{Kind: "migrate", Job: mv.Job, UID: a.localOwner(mv.Job), From: a.cfg.NodeID, To: mv.To, Why: mv.Why, FreezeMS: m.FreezeMS}
	if err != nil {
		a.withdraw(mv)
		now := time.Now()
		a.sch.mu.Lock()
		a.sch.ledger.Forget(mv)
		a.sch.ledger.Failed(mv.Job, now)
		a.sch.mu.Unlock()
		e.Kind, e.Why = "failed", mv.Why+"; failed: "+err.Error()
		if reason, pinned := migrate.PinReason(err); pinned {
			a.jobs.mu.Lock()
			if lj := a.jobs.local[mv.Job]; lj != nil {
				lj.unmovable = reason
			}
			a.jobs.mu.Unlock()
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

// snapshot measures the node and its jobs for a round.
func (a *Agent) snapshot() sched.Snapshot {
	now := time.Now()
	runnable := a.runnable()
	mem := a.prober.MemFreeMB()
	s := sched.Snapshot{Now: now}
	s.Self = sched.Node{ID: a.cfg.NodeID, Capacity: a.capacity, Load: float64(runnable) / a.capacity, MemFreeMB: mem, Draining: a.draining.Load()}
	s.Peers = a.members.Peers()
	a.sch.mu.Lock()
	a.sch.ledger.ApplyHeard(s.Peers)
	a.sch.mu.Unlock()

	refs, here := a.jobRefs()
	// /proc is read with no lock held: LocalState (memberlist's, which
	// must not block) and the API take the scheduler's lock meanwhile.
	probed := a.probeJobs(refs)
	a.sch.mu.Lock()
	defer a.sch.mu.Unlock()
	next := make(map[string]ioSample, len(probed))
	least := 0.0 // sched.Node.Least
	for _, p := range probed {
		j := p.job
		if p.runnable > 0 && (least == 0 || j.Attained < least) {
			least = j.Attained
		}
		if prev, ok := a.sch.prev[j.ID]; ok && now.After(prev.at) && p.syscalls >= prev.syscalls {
			j.SyscallsPerSec = float64(p.syscalls-prev.syscalls) / now.Sub(prev.at).Seconds()
		}
		next[j.ID] = ioSample{now, p.syscalls}
		s.Jobs = append(s.Jobs, j)
	}
	a.sch.prev = next
	a.selfLeast.Store(math.Float64bits(least))
	a.sch.ledger.ApplyFailures(s.Jobs, here)
	s.Recent = a.sch.ledger.Recent(now)
	return s
}

// jobRef is what a scheduling round reads of a job running here.
type jobRef struct {
	rec             job.Local
	unmovable       string
	migrating, done bool
}

// jobRefs copies, under the job table's lock, what a round reads of the
// jobs running here, and their ids.
func (a *Agent) jobRefs() ([]jobRef, []string) {
	a.jobs.mu.Lock()
	defer a.jobs.mu.Unlock()
	refs := make([]jobRef, 0, len(a.jobs.local))
	here := make([]string, 0, len(a.jobs.local))
	for id, lj := range a.jobs.local {
		refs = append(refs, jobRef{lj.rec, lj.unmovable, lj.migrating, lj.rec.Done})
		here = append(here, id)
	}
	return refs, here
}

// probedJob is a job as the probes saw it: what the policies judge, and
// its runnable threads and system calls so far.
type probedJob struct {
	job      sched.Job
	runnable int
	syscalls uint64
}

// probeJobs reads /proc and the jobs' cgroups for every job that runs
// here and is not moving or ending; it takes no lock of the agent's.
func (a *Agent) probeJobs(refs []jobRef) []probedJob {
	out := make([]probedJob, 0, len(refs))
	for _, r := range refs {
		if r.migrating || r.done || !a.procs.Alive(r.rec.PID, r.rec.StartTix) {
			continue
		}
		if _, ended := job.ReadStatus(r.rec.Dir); ended {
			continue
		}
		run, sys, rss := a.procs.Activity(r.rec.PID)
		j := sched.Job{ID: r.rec.ID, Started: r.rec.Started, LastMoved: r.rec.LastMoved, Moves: r.rec.Moves, RSSMB: rss, Runnable: run,
			Attained: a.attained(r.rec)}
		switch {
		case r.rec.Hold == migrate.HoldPin:
			j.Held = "pinned (run --pin)"
		case r.unmovable != "":
			j.Held = r.unmovable // a drain does not try it again either
		case r.rec.Hold == migrate.HoldManual:
			j.Held, j.Manual = "placed by hand", true
		}
		out = append(out, probedJob{job: j, runnable: run, syscalls: sys})
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
	a.jobs.mu.Lock()
	lj := a.jobs.local[id]
	if lj == nil {
		a.jobs.mu.Unlock()
		return errkind.New(peer.ErrNotFound, "job %s is not running on node %s", id, a.cfg.NodeID)
	}
	if lj.rec.Hold == migrate.HoldManual {
		lj.rec.Hold = migrate.HoldNone
	}
	lj.unmovable = ""
	rec := lj.rec
	a.jobs.mu.Unlock()
	if err := a.store.PutLocals(rec); err != nil {
		a.log.Error("job table", "err", err)
	}
	a.kickScheduler()
	return nil
}

// ---- routes ----
