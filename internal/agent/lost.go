package agent

// Node loss, seen from a job's home. When membership declares a node dead
// (memberlist's failure detection, or a node that left), every job this
// home has running there is marked lost at once: `roam ps` shows it lost
// with the node and the time, and an attached `roam run` ends for it with
// ExitLost; unless it has a periodic checkpoint kept on a live node: it is
// then restarted from it on another node (package checkpoints), as a new
// incarnation whose home refuses news of the old one.
//
// A node that was cut off, not crashed, still runs its jobs and keeps
// their output in its spool. Once it can reach the home again its next
// update (output, an exit, or the heartbeat every jobtable.AliveEvery) brings the
// job back: running again on that node, its output appended from the
// offset the home has, its exit status taken once.

import (
	"time"

	"roam/internal/agent/jobtable"
	"roam/internal/agent/loss"
	"roam/internal/agent/reopen"
	"roam/internal/api"
	"roam/internal/job"
)

// sweepLost marks lost every job of this home recorded as running on a
// node loss.Dead takes for dead. It runs when a member leaves and every
// jobtable.AliveEvery, so a record that turned running on a node already dead (a
// slow start answered, a late migration note) is caught too.
func (a *Agent) sweepLost() {
	now := time.Now()
	// Membership first, then the jobs: the two locks are never held
	// together.
	all := a.members.All()
	news := make(map[string]loss.News, len(all))
	for id, p := range all {
		news[id] = loss.News{Listed: true, Alive: p.Alive, Since: p.Since}
	}
	heard := a.jobs.HeardFrom()
	dead := func(node string) bool {
		if node == a.cfg.NodeID || node == "" {
			return false
		}
		n := news[node]
		n.Heard = heard[node]
		return loss.Dead(n, a.started, now)
	}
	// Restarted from its newest checkpoint instead (package checkpoints).
	again := func(r job.Record) bool { return reopen.Restartable(r.Newest, r.Node, dead) }
	lost, restart, err := a.jobs.MarkLost(now, dead, again)
	if err != nil {
		a.log.Error("job table", "err", err)
	}
	for _, r := range restart {
		go a.checkpoints.RestartLost(r, r.Node)
	}
	for _, r := range lost {
		a.log.Warn("job lost", "job", r.ID, "node", r.Node)
		a.event(api.Event{Kind: "lost", Job: r.ID, UID: &r.UID, From: r.Node, Why: "its node was declared dead"})
	}
}

// lostLoop sweeps every jobtable.AliveEvery, and at once when a member leaves;
// it also tidies the job cgroups and, every expireEvery, removes the ended
// jobs past their keep.
func (a *Agent) lostLoop() {
	defer a.wg.Done()
	t := time.NewTicker(jobtable.AliveEvery)
	defer t.Stop()
	var expired time.Time
	for {
		select {
		case <-a.stop:
			return
		case now := <-t.C:
			// What ended or moved away left its cgroup behind.
			a.procs.Tidy()
			if now.Sub(expired) >= expireEvery {
				expired = now
				if n := a.expireJobs(now); n > 0 {
					a.log.Info("ended jobs removed after their keep", "jobs", n)
				}
				// Restarts it consented to and has not heard of since.
				ended, err := a.jobs.ExpireRuns(now)
				for _, d := range ended {
					a.log.Warn("restart ended by its home", "job", d.ID, "mid", d.MID, "why", d.Error)
				}
				if err != nil {
					a.log.Error("job table", "err", err)
				}
			}
		case <-a.memberLeft:
		}
		a.sweepLost()
	}
}
