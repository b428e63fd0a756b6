package jobtable

// The job table's part of the home's queue (package queue): what a round
// reads of the home records (the pending jobs by sweep or lone job, the
// users' running jobs, the jobs started on other nodes lately), and why
// the last round left each pending job waiting. The reasons are the last
// round's, kept in memory only: a home that restarts says them again at
// its first round.

import (
	"fmt"
	"maps"
	"time"

	"roam/internal/agent/relay"
	"roam/internal/cpufeat"
	"roam/internal/job"
	"roam/internal/migrate"
	"roam/internal/queue"
	"roam/internal/sweep"
)

// Queued is what a round of the queue reads of this home's records.
type Queued struct {
	Groups []queue.Group
	// Running is each user's jobs starting or running from this home.
	Running map[uint32]int
	// Placed are the live jobs started since the time given, with their
	// nodes.
	Placed []queue.Placed
	// Runs are the running jobs of the groups with jobs pending, as
	// preemption reads them (their CPU is their nodes' to say).
	Runs []queue.Run
}

// Queue copies what a round of the queue needs: the pending jobs, by
// sweep (or alone), and the live jobs started after since. Only the ids
// of pending jobs are copied: a sweep of thousands waiting is read at
// every round.
func (j *Table) Queue(since time.Time) Queued {
	j.mu.Lock()
	defer j.mu.Unlock()
	q := Queued{Running: map[uint32]int{}}
	groups := map[string]*queue.Group{}
	running := map[string]int{}
	for _, r := range j.home {
		key := r.Sweep.ID
		if key == "" {
			key = r.ID
		}
		switch {
		case r.State == job.StatePending:
			g := groups[key]
			if g == nil {
				g = &queue.Group{Key: key, UID: r.UID, Seq: seqOf(r), On: r.Sweep.On, MaxRunning: r.Sweep.MaxRunning, Within: r.Within, Slurm: r.Slurm}
				groups[key] = g
			}
			if preempted := !r.Preempted.IsZero(); !preempted || Restorable(*r) {
				g.Pending = append(g.Pending, queue.Job{Index: r.Sweep.Index, ID: r.ID, Req: r.Req, Preempted: preempted, CPU: checkpointCPU(*r)})
			}
		case r.Over():
		default:
			running[key]++
			q.Running[r.UID]++
			if r.Node != "" && r.Started.After(since) {
				q.Placed = append(q.Placed, queue.Placed{Node: r.Node, MemMB: r.Req.MemMB(), Slots: r.Req.Slots(), Started: r.Started})
			}
			if r.State == job.StateRunning && r.Node != "" {
				q.Runs = append(q.Runs, queue.Run{ID: r.ID, Node: r.Node, Key: key, MemMB: r.Req.MemMB(), Preempted: !r.Preempted.IsZero(), Held: heldFromPreemption(r)})
			}
		}
	}
	for key, g := range groups {
		g.Running = running[key]
		q.Groups = append(q.Groups, *g)
	}
	runs := q.Runs[:0]
	for _, r := range q.Runs {
		if g := groups[r.Key]; g != nil && len(g.Pending) > 0 {
			runs = append(runs, r)
		}
	}
	q.Runs = runs
	return q
}

// Restorable says a preempted job's checkpoint is noted at its home: the
// last checkpoint tried, kept on a node (its note may come after its
// exit).
func Restorable(r job.Record) bool {
	n := len(r.Checkpoints)
	return r.Newest != nil && n > 0 && r.Checkpoints[n-1].OK && r.Checkpoints[n-1].At.Equal(r.Newest.At) && r.Newest.StoredOn != ""
}

// heldFromPreemption says why a running job may not be preempted, as its
// record tells ("": it may): pinned, found unmovable, placed by hand, or
// a checkpoint of it failed (not tried again). Its node judges the rest.
func heldFromPreemption(r *job.Record) string {
	switch {
	case r.Pin:
		return "pinned (run --pin)"
	case r.PinReason != "":
		return r.PinReason
	case r.Manual:
		return "placed by hand"
	}
	for _, c := range r.Checkpoints {
		if !c.OK {
			return "a checkpoint of it failed: " + c.Error
		}
	}
	return ""
}

// seqOf is the number of a record's run in its home's sequence: its
// sweep's, or its own.
func seqOf(r *job.Record) uint64 {
	if r.Sweep.ID != "" {
		n, _ := sweep.Seq(r.Sweep.ID)
		return n
	}
	_, n, _ := migrate.JobSeq(r.ID)
	return n
}

// SetWaiting keeps why the last round left each group's pending jobs
// waiting (by sweep id, or a lone job's id), and whether any waits for
// room on a node (a load entry showing room is then news).
func (j *Table) SetWaiting(why map[string]string, forRoom bool) {
	j.mu.Lock()
	j.waiting, j.forRoom = why, forRoom
	j.mu.Unlock()
}

// Waiting is why the pending jobs of this home wait, by sweep id or lone
// job id, as the last round said (a copy).
func (j *Table) Waiting() map[string]string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return maps.Clone(j.waiting)
}

// ForRoom says whether the last round left jobs waiting for room.
func (j *Table) ForRoom() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.forRoom
}

// LosePreempted gives up preempted job id, still pending, whose restart
// failed tries times (the last with err): it is lost, with the reason.
func (j *Table) LosePreempted(id string, tries int, err error, now time.Time) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	r := j.home[id]
	if r == nil || r.State != job.StatePending || r.Preempted.IsZero() {
		return nil
	}
	c := *r
	c.State, c.LostAt, c.Ended = job.StateLost, now, now
	c.EndReason = relay.LimitText(fmt.Sprintf("preempted, and its restart from its checkpoint failed %d times: %v", tries, err))
	if err := j.putHome(map[string]*job.Record{id: &c}); err != nil {
		return err
	}
	j.kickIfSweep(&c)
	j.wakeReaders(id)
	return nil
}

// checkpointCPU is the CPU features of record r's newest checkpoint (its
// program's, which a restore needs), zero when it has none or they are
// not known.
func checkpointCPU(r job.Record) cpufeat.Set {
	if r.Newest == nil {
		return cpufeat.Set{}
	}
	s, _ := cpufeat.Parse(r.Newest.CPU)
	return s
}
