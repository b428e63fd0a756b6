package launch

// The state disk's reserve (limits.disk_reserve_bytes) over the jobs a
// start request starts. The push that holds the reserve over the jobs
// running here sees only jobs recorded, and a request's jobs are recorded
// once all of them started: jobs writing as fast as they can fill a disk
// in the time a request of a hundred takes to start. So while a request's
// jobs start, the disk is watched as the push watches it, and the jobs
// just started of the users whose output took it below its reserve are
// ended and answered as starts refused; their homes place them again, as
// any refused start.

import (
	"strconv"
	"sync"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/agent/spool"
	"roam/internal/job"
)

// diskEvery is how often a node starting jobs looks at its state disk's
// free space (a statfs), as the push loop does while jobs run.
const diskEvery = 5 * time.Millisecond

// batch is one start request's jobs as this node starts them.
type batch struct {
	s   *Starter
	req peer.StartRequest
	// mu guards the rest: the starts' goroutines, the loop that starts
	// them and the disk's watch all write them.
	mu    sync.Mutex
	out   []peer.StartResult
	procs []*job.Proc
	began []time.Time
	// victims are the users whose jobs this request started were ended
	// for the reserve: their other jobs in it are not started.
	victims map[uint32]bool
}

func (s *Starter) newBatch(req peer.StartRequest) *batch {
	b := &batch{s: s, req: req, out: make([]peer.StartResult, len(req.Jobs)), procs: make([]*job.Proc, len(req.Jobs)),
		began: make([]time.Time, len(req.Jobs)), victims: map[uint32]bool{}}
	for i, sp := range req.Jobs {
		b.out[i].ID = sp.ID
	}
	return b
}

// watch holds the reserve every diskEvery until the returned stop, which
// holds it once more, after the last start.
func (b *batch) watch() (stop func()) {
	done, over := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(over)
		t := time.NewTicker(diskEvery)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				b.mu.Lock()
				b.hold()
				b.mu.Unlock()
			}
		}
	}()
	return func() {
		close(done)
		<-over
		b.mu.Lock()
		b.hold()
		b.mu.Unlock()
	}
}

// diskRefusal is why job i is not to start for the reserve: its user's
// jobs here were ended for it, or the disk is below it now (and the jobs
// this request started are held to it first).
func (b *batch) diskRefusal(i int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	uid := b.req.Jobs[i].UID
	if short := b.s.cfg.Limits.DiskShort(b.s.cfg.Free(), 0); short != nil {
		b.hold()
		return "node " + b.s.cfg.Self + " starts no job: " + short.Error()
	}
	if b.victims[uid] {
		return b.victimRefusal(uid)
	}
	return ""
}

func (b *batch) victimRefusal(uid uint32) string {
	return "node " + b.s.cfg.Self + " starts no more of user " + strconv.FormatUint(uint64(uid), 10) +
		"'s jobs now: their output took its state disk below its reserve (limits.disk_reserve_bytes)"
}

// refused answers job i with why.
func (b *batch) refused(i int, why string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.out[i].Error = why
}

// started notes job i's start (err: it did not start); a job of a user
// whose jobs were ended for the reserve meanwhile is ended at once.
func (b *batch) started(i int, p *job.Proc, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	id := b.req.Jobs[i].ID
	if err != nil {
		b.s.cfg.Jobs.Unreserve(id)
		b.out[i].Error = err.Error()
		return
	}
	b.procs[i], b.began[i], b.out[i].PID = p, time.Now(), p.PID
	if uid := b.req.Jobs[i].UID; b.victims[uid] {
		b.out[i] = peer.StartResult{ID: id, Error: b.victimRefusal(uid)}
		b.s.end(p, id)
	}
}

// hold ends, when the disk is below its reserve, the jobs started of the
// users whose output there covers what is short (limits.ReserveVictims),
// every one at once. b.mu is held.
func (b *batch) hold() {
	lim := b.s.cfg.Limits
	free := b.s.cfg.Free()
	short := lim.DiskShort(free, 0)
	if short == nil {
		return
	}
	used := map[uint32]int64{}
	for i, p := range b.procs {
		if p != nil && b.out[i].Error == "" {
			used[b.req.Jobs[i].UID] += spool.Blocks(p.Dir)
		}
	}
	for _, uid := range lim.ReserveVictims(free, used) {
		b.s.cfg.Log.Warn("jobs just started ended: the state disk's reserve", "uid", uid, "bytes", used[uid], "free", free)
		b.victims[uid] = true
		var wg sync.WaitGroup
		for i, p := range b.procs {
			if p == nil || b.out[i].Error != "" || b.req.Jobs[i].UID != uid {
				continue
			}
			b.out[i] = peer.StartResult{ID: b.out[i].ID, Error: "node " + b.s.cfg.Self + " starts no job: " + short.Error()}
			wg.Go(func() { b.s.end(p, b.out[i].ID) })
		}
		wg.Wait()
	}
}
