package news

// The node a job runs on: its output and exit status go to its home
// (this node or another), and the home's acknowledgements come back.

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"roam/internal/agent/fencing"
	"roam/internal/agent/jobtable"
	"roam/internal/agent/peer"
	"roam/internal/agent/relay"
	"roam/internal/agent/reopen"
	"roam/internal/agent/spool"
	"roam/internal/api"
	"roam/internal/job"
	"roam/internal/resources"
)

// PushLoop pushes news every pushEvery while jobs run here; with none it
// sleeps until a start kicks it, so an idle agent does not wake 20 times a
// second for nothing. The leases of the jobs here are stepped beside it,
// on a goroutine of their own: a push that waits for a slow home must not
// hold up a stop or a kill. It returns once Config.Stop closes.
func (r *Relay) PushLoop() {
	fenced := make(chan struct{})
	go func() {
		defer close(fenced)
		r.leases.Loop(r.c.Stop)
	}()
	defer func() { <-fenced }()
	t := time.NewTicker(pushEvery)
	defer t.Stop()
	for {
		tick := t.C
		if !(r.c.Jobs.Count() > 0) {
			tick = nil
		}
		select {
		case <-r.c.Stop:
			return
		case <-tick:
		case <-r.c.Jobs.Kicked():
			select {
			case r.woken <- struct{}{}:
			default:
			}
		}
		r.pushOnce()
	}
}

// pushOnce sends every job's news to its home (this node or another),
// each home's on a goroutine of its own, so that a slow home holds up no
// other home's news and no other home's leases. A home membership says
// is dead is tried in the background (tryDead) until it is back: its
// jobs run on and their output waits in their spool (home loss).
func (r *Relay) pushOnce() {
	byHome := map[string][]*jobtable.HomeBatch{}
	for _, b := range r.PushBatches() {
		if r.c.Members.Reachable(b.Home) {
			byHome[b.Home] = append(byHome[b.Home], b)
		} else {
			r.tryDead(b)
		}
	}
	var wg sync.WaitGroup
	for _, bs := range byHome {
		wg.Go(func() {
			for _, b := range bs {
				if !r.push(b) {
					return
				}
			}
		})
	}
	wg.Wait()
}

// tryDead sends batch b to its home, which membership says is dead, in
// the background, one at a time for each home: membership takes a few
// rounds to see a link back (a node cut for 2.5 s had its home declared
// dead after the link was back), and the leases of that home's jobs here
// run out meanwhile: the chaos run's job, whose home a short cut had
// left, was stopped at fence.lease and killed at fence.kill with its
// home answering again. A home that answers takes the news, and renews
// the leases, before membership says it is alive; one that does not
// costs a goroutine that ends at the push's timeout, and holds up no
// other home's news.
func (r *Relay) tryDead(b *jobtable.HomeBatch) {
	r.deadMu.Lock()
	if r.deadTry == nil {
		r.deadTry = map[string]bool{}
	}
	if r.deadTry[b.Home] {
		r.deadMu.Unlock()
		return
	}
	r.deadTry[b.Home] = true
	r.deadMu.Unlock()
	go func() {
		r.push(b)
		r.deadMu.Lock()
		delete(r.deadTry, b.Home)
		r.deadMu.Unlock()
	}()
}

// push sends one batch to its home and takes the answer; a push the home
// answered renews the leases of its jobs here from when it was sent. It
// waits at most half a lease: a push answered later renews them too late
// to matter, and the next one must not wait behind it.
func (r *Relay) push(b *jobtable.HomeBatch) bool {
	var acks map[string]relay.Ack
	sent := time.Now()
	if err := r.c.Peers.Do(min(peer.Timeout, r.c.Fence.Lease/2), b.Addr, http.MethodPost, peer.Updates, b.Ups, &acks); err != nil {
		r.c.Log.Debug("push to home", "home", b.Home, "err", err)
		return false
	}
	// Gone copies are killed before the leases are renewed: a renewal
	// thaws what its fence stopped.
	r.applyAcks(acks)
	for _, k := range acks {
		if k.Renews() {
			r.leases.Reached(b.Home, sent)
			break
		}
	}
	return true
}

// FenceHolds says whether job id's fence holds it stopped here
// (fencing.Leases.Holding).
func (r *Relay) FenceHolds(id string) bool { return r.leases.Holding(id) }

// FenceKilled says whether job id's fence killed it here.
func (r *Relay) FenceKilled(id string) bool { return r.leases.Killed(id) }

// PushBatches collects every job's news by home node, in batches of no
// more than jobtable.PushBatch bytes of output (one job's news may be
// more), and notes in the job table what it collected as sent. The job
// lock is held only to copy what each job's news needs and to note what
// was sent: the spools and /proc are read without it, so that a slow disk
// or thousands of jobs do not stop every request of the node. It tells
// the leases which jobs run here, and the home why a fence killed one.
func (r *Relay) PushBatches() []*jobtable.HomeBatch {
	now := time.Now()
	items := r.c.Jobs.PushItems(now)
	running := make([]fencing.Job, 0, len(items))
	quiet := r.quietOnes(items, now)
	for _, it := range items {
		if it.CheckCap {
			if n := spool.Size(it.St.Dir); n > r.c.Limits.OutputBytes {
				it.Killed = fmt.Sprintf("killed: its output passed %s (limits.output_bytes)", api.Bytes(r.c.Limits.OutputBytes))
				r.c.Log.Warn("job killed: output limit", "job", it.Id, "bytes", n, "limit", r.c.Limits.OutputBytes)
			}
		}
		it.U, it.Send = read(it.St, r.c.Procs, quiet[it.Id])
		l := it.St.Rec
		running = append(running, leaseJob(l))
	}
	r.leases.Running(running, r.c.Jobs.IsLocal, now)
	for _, it := range items {
		if it.U.Exit != nil && r.c.Procs.OOMKills(it.Id) > 0 {
			it.Ended = oomReason(it.St.Req)
		} else if it.U.Exit != nil && it.St.RootSignal != 0 {
			it.Ended = reopen.EndedByRoot(it.St.RootSignal)
		} else if it.U.Exit != nil {
			it.U.Fenced = r.leases.Killed(it.Id)
			if !it.U.Fenced && *it.U.Exit >= 128 && r.killedByDump(it.Id, now) {
				it.U.Fenced, it.Ended = true, api.EndDumpFailed // roam's dump killed it (dumps.go)
			}
		}
	}
	// A quiet job's heartbeat renews its home's leases here too.
	out, kills := r.c.Jobs.Pushed(items, r.c.Self, min(jobtable.AliveEvery, r.c.Fence.HeartbeatEvery()), now)
	for _, k := range kills {
		go r.c.Procs.Kill(k.Pid, k.Tix, 5*time.Second)
	}
	return r.beatMoving(out, running)
}

// beatMoving adds to out a heartbeat of a job here that is moving away,
// for each home that has such a job and nothing else in out. A moving
// job's news waits for its migration, and a migration that stalls (its
// destination cut off) sent its home nothing until it ended: with no
// other job of that home here, nothing renewed the home's leases, and
// the fence stopped and killed the job with its home in reach (the
// chaos run: a job at its home itself, migrating to a node cut off, was
// killed at fence.kill, 137). The heartbeat carries no output (offsets
// -1: the home answers what it has) and no exit; its home takes it as
// news of this node while its record says the job runs here.
func (r *Relay) beatMoving(out []*jobtable.HomeBatch, listed []fencing.Job) []*jobtable.HomeBatch {
	has := make(map[string]bool, len(out))
	for _, b := range out {
		has[b.Home] = true
	}
	running := make(map[string]bool, len(listed))
	for _, j := range listed {
		running[j.ID] = true
	}
	for _, id := range r.leases.Known() {
		if running[id] {
			continue
		}
		l, ok := r.c.Jobs.LocalRec(id)
		if !ok || l.Home == "" || has[l.Home] {
			continue
		}
		has[l.Home] = true
		moves := l.Moves
		u := relay.Update{ID: id, Node: r.c.Self, Inc: l.Inc, Moves: &moves, OutOff: -1, ErrOff: -1}
		out = append(out, &jobtable.HomeBatch{Home: l.Home, Addr: l.HomeAddr, Ups: []relay.Update{u}, Size: relay.UpdateOverhead})
	}
	return out
}

// leaseJob is what the leases need of job l, running here. It is fenced
// once a checkpoint of it is kept (job.Local.Checkpointed), not as soon as
// it asks for periodic ones: with none kept yet its home has nothing to
// restart it from, and a fence that killed it lost it (the chaos run).
func leaseJob(l job.Local) fencing.Job {
	return fencing.Job{ID: l.ID, Home: l.Home, PID: l.PID, Tix: l.StartTix, Fenced: l.Checkpointed, Cap: l.LeaseCap}
}

// LeaseAge is how old job l's lease here is (fencing.Leases.Age), for the
// header of its migration.
func (r *Relay) LeaseAge(l job.Local) time.Duration { return r.leases.Age(leaseJob(l), time.Now()) }

// oomReason is why a job the kernel's OOM killer acted in ended: its own
// limit (--mem), or, without one, the node's limit of all its jobs
// together (jobs.memory_bytes).
func oomReason(r resources.Request) string {
	if r.MemBytes > 0 {
		return "out of memory (--mem " + resources.FormatMem(r.MemBytes) + ")"
	}
	return "out of memory (the node's memory for jobs, jobs.memory_bytes: no --mem)"
}

// read reads what the home does not have yet: the output past what it
// acknowledged, and the exit status once the job has ended. A job whose
// home said lately it has no room for output (quiet: relay.Ack.Full)
// sends none: once it has ended, its end alone, with the sizes of its
// output here, which the home, still short, records with what it has
// (takeOutput), or, with room again, answers so that the output follows.
// It does I/O and takes no lock.
func read(st jobtable.NewsState, procs job.Processes, quiet bool) (relay.Update, bool) {
	if st.AckOut < 0 || st.AckErr < 0 {
		// After a restart: ask the home what it has first.
		return relay.Update{OutOff: -1, ErrOff: -1}, true
	}
	// Read the status before the output: output written before the exit
	// is then surely in the files we read next.
	code, ended := job.ReadStatus(st.Dir)
	if !ended && !procs.Alive(st.Pid, st.Tix) {
		if code, ended = job.ReadStatus(st.Dir); !ended {
			code, ended = 128+int(syscall.SIGKILL), true // killed before it could write
		}
	}
	if quiet {
		if !ended {
			return relay.Update{}, false
		}
		out, errb := spoolSize(st.Dir, "stdout", st.AckOut), spoolSize(st.Dir, "stderr", st.AckErr)
		return relay.Update{OutOff: st.AckOut, ErrOff: st.AckErr, Exit: &code, FinalOut: out, FinalErr: errb, Used: used(st, procs)}, true
	}
	out, _ := job.ReadSpool(st.Dir, "stdout", st.AckOut, pushChunk)
	errb, _ := job.ReadSpool(st.Dir, "stderr", st.AckErr, pushChunk)
	u := relay.Update{OutOff: st.AckOut, Out: out, ErrOff: st.AckErr, Err: errb}
	if ended && len(out) < pushChunk && len(errb) < pushChunk {
		u.Exit = &code
		u.FinalOut = st.AckOut + int64(len(out))
		u.FinalErr = st.AckErr + int64(len(errb))
		u.Used = used(st, procs)
	}
	return u, len(out) > 0 || len(errb) > 0 || u.Exit != nil
}

// spoolSize is the size of a job's stream in its spool dir, at least
// acked (what its home has of it).
func spoolSize(dir, stream string, acked int64) int64 {
	if fi, err := os.Stat(filepath.Join(dir, stream)); err == nil {
		return max(fi.Size(), acked)
	}
	return acked
}

// quietOnes are the jobs of items whose home said at most quietFor ago
// that it has no room for their output (noteFull); it forgets the jobs
// no longer here, and those whose quiet is over.
func (r *Relay) quietOnes(items []*jobtable.PushItem, now time.Time) map[string]bool {
	r.fullMu.Lock()
	defer r.fullMu.Unlock()
	here := make(map[string]time.Time, len(r.full))
	quiet := map[string]bool{}
	for _, it := range items {
		if at, ok := r.full[it.Id]; ok && now.Sub(at) < quietFor {
			here[it.Id], quiet[it.Id] = at, true
		}
	}
	r.full = here
	return quiet
}

// noteFull notes of each job of acks whether its home had no room for
// its output (relay.Ack.Full), at now.
func (r *Relay) noteFull(acks map[string]relay.Ack, now time.Time) {
	r.fullMu.Lock()
	defer r.fullMu.Unlock()
	for id, k := range acks {
		if k.Full && !k.Done {
			if r.full == nil {
				r.full = map[string]time.Time{}
			}
			r.full[id] = now
		} else {
			delete(r.full, id)
		}
	}
}

// applyAcks takes a home's answer to a push.
func (r *Relay) applyAcks(acks map[string]relay.Ack) {
	r.noteFull(acks, time.Now())
	// gone: the home has no record, killed if alive; dirs: spools of
	// jobs whose home has everything.
	gone, dirs := r.c.Jobs.Acked(acks)
	if len(dirs) > 0 {
		r.c.KickLoad()
	}
	// /proc and the disk without the job lock.
	for _, l := range gone {
		if r.c.Procs.Alive(l.PID, l.StartTix) {
			r.c.Log.Warn("job ended: its home has no record of this copy (none of the job, or of an older incarnation)", "job", l.ID, "home", l.Home)
			r.c.Procs.Kill(l.PID, l.StartTix, 5*time.Second)
		}
	}
	for _, d := range dirs {
		os.RemoveAll(d)
	}
}

// used is what an ended job used, from its cgroup here, which outlives
// its processes until its home has this (Tidy keeps it): its CPU seconds
// on every node it ran on, and the highest peak of those nodes'.
func used(st jobtable.NewsState, procs job.Processes) *job.Usage {
	cpu, _ := procs.Usage(st.Rec.ID, st.Pid)
	return &job.Usage{CPUSeconds: st.Rec.Attained(cpu), PeakMB: max(st.Rec.PeakBefore, procs.PeakMB(st.Rec.ID))}
}
