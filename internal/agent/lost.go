package agent

// Node loss, seen from a job's home. When membership declares a node dead
// (memberlist's failure detection, or a node that left), every job this
// home has running there is marked lost at once: `roam ps` shows it lost
// with the node and the time, and an attached `roam run` ends for it with
// ExitLost. Nothing is restarted, so there is never a second copy.
//
// A node that was cut off, not crashed, still runs its jobs and keeps
// their output in its spool. Once it can reach the home again its next
// update (output, an exit, or the heartbeat every aliveEvery) brings the
// job back: running again on that node, its output appended from the
// offset the home has, its exit status taken once.

import (
	"fmt"
	"time"

	"roam/internal/api"
	"roam/internal/job"
)

// aliveEvery is how often a node tells a job's home that the job still
// runs there when it has nothing else to say. It is what brings a lost
// job back without output, and what tells a node that a job's home has
// forgotten it (a half-started run), so that it ends it.
const aliveEvery = 5 * time.Second

// markLost marks lost every job of this home that runs on node.
func (a *Agent) markLost(node string) {
	if node == a.cfg.NodeID {
		return
	}
	now := time.Now()
	a.jobs.mu.Lock()
	var lost []job.Record
	for _, r := range a.jobs.home {
		if r.Node == node && r.State == job.StateRunning {
			r.State, r.LostAt = job.StateLost, now
			lost = append(lost, *r)
			if ch := a.jobs.wake[r.ID]; ch != nil {
				close(ch)
				delete(a.jobs.wake, r.ID)
			}
		}
	}
	a.jobs.mu.Unlock()
	if len(lost) == 0 {
		return
	}
	if err := a.store.PutRecords(lost...); err != nil {
		a.log.Error("job table", "err", err)
	}
	for _, r := range lost {
		a.log.Warn("job lost", "job", r.ID, "node", node)
		a.event(api.Event{Kind: "lost", Job: r.ID, From: node, Why: "its node was declared dead"})
	}
}

// revive brings a lost job back: node says it runs it. Called with
// jobs.mu held; the caller writes the record and, when it returns an
// event, records it once the lock is let go.
func revive(rec *job.Record, node string) (api.Event, bool) {
	if rec.State != job.StateLost || node == "" {
		return api.Event{}, false
	}
	why := fmt.Sprintf("its node answers again and still runs it (lost for %v)", time.Since(rec.LostAt).Round(time.Millisecond))
	rec.State, rec.Node, rec.LostAt = job.StateRunning, node, time.Time{}
	return api.Event{Kind: "back", Job: rec.ID, To: node, Why: why}, true
}
