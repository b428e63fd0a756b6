package news

// Node loss, seen from a job's home. When membership declares a node dead
// (memberlist's failure detection, or a node that left), every job this
// home has running there is marked lost at once: `roam ps` shows it lost
// with the node and the time, and an attached `roam run` ends for it with
// ExitLost; unless it has a periodic checkpoint kept on a live node: it is
// then restarted from it on another node (Config.RestartLost), as a new
// incarnation whose home refuses news of the old one, once the node's
// fence has killed the old one (package fence).
//
// A node that was cut off, not crashed, still runs its jobs and keeps
// their output in its spool. Once it can reach the home again its next
// update (output, an exit, or the heartbeat every jobtable.AliveEvery)
// brings the job back: running again on that node, its output appended
// from the offset the home has, its exit status taken once.

import (
	"time"

	"roam/internal/agent/jobtable"
	"roam/internal/agent/loss"
	"roam/internal/api"
)

// LostLoop sweeps every jobtable.AliveEvery, and at once when a member
// leaves (Config.Left); it also tidies the job cgroups and, every
// expireEvery, removes the ended jobs past their keep. started is when
// the agent started: a node membership has never listed is taken for
// dead only loss.Grace after it. It returns once Config.Stop closes.
func (r *Relay) LostLoop(started time.Time) {
	t := time.NewTicker(jobtable.AliveEvery)
	defer t.Stop()
	var expired time.Time
	for {
		select {
		case <-r.c.Stop:
			return
		case now := <-t.C:
			// What ended or moved away left its cgroup behind; an ended
			// job's counts until its home has them (read).
			r.c.Procs.Tidy(r.c.Jobs.IsLocal)
			if now.Sub(expired) >= expireEvery {
				expired = now
				r.expire(now)
			}
		case <-r.c.Left:
		}
		r.sweepLost(started)
	}
}

// expire removes the ended jobs past their keep, and ends the restarts
// this home consented to and has not heard of since.
func (r *Relay) expire(now time.Time) {
	if n := r.expireJobs(now); n > 0 {
		r.c.Log.Info("ended jobs removed after their keep", "jobs", n)
	}
	ended, err := r.c.Jobs.ExpireRuns(now)
	for _, d := range ended {
		r.c.Log.Warn("restart ended by its home", "job", d.ID, "mid", d.MID, "why", d.Error)
	}
	if err != nil {
		r.c.Log.Error("job table", "err", err)
	}
}

// sweepLost marks lost every job of this home recorded as running on a
// node loss.Dead takes for dead. It runs when a member leaves and every
// jobtable.AliveEvery, so a record that turned running on a node already
// dead (a slow start answered, a late migration note) is caught too.
func (r *Relay) sweepLost(started time.Time) {
	now := time.Now()
	// Membership first, then the jobs: the two locks are never held
	// together.
	all := r.c.Members.All()
	news := make(map[string]loss.News, len(all))
	for id, p := range all {
		news[id] = loss.News{Listed: true, Alive: p.Alive, Since: p.Since}
	}
	heard := r.c.Jobs.HeardFrom()
	dead := map[string]bool{}
	for _, node := range r.c.Jobs.RunningNodes() {
		if node == r.c.Self {
			continue
		}
		n := news[node]
		n.Heard = heard[node]
		dead[node] = loss.Dead(n, started, now)
	}
	// A job whose newest checkpoint is kept on a live node is restarted
	// from it instead (Config.RestartLost), once its node has surely
	// killed it: fence.kill+fence.margin after this home last heard from
	// that node, or after this agent started (package fence). Until then
	// its record says it runs there, as it may.
	lost, restart, err := r.c.Jobs.MarkLost(now, dead)
	if err != nil {
		r.c.Log.Error("job table", "err", err)
	}
	for _, rec := range restart {
		if at := r.c.Fence.RestartAt(heard[rec.Node], started, r.c.Members.FenceKill(rec.Node)); now.Before(at) {
			r.c.Log.Debug("restart waits for the job's fence on its node", "job", rec.ID, "node", rec.Node, "at", at)
			continue
		}
		go r.c.RestartLost(rec, rec.Node, false)
	}
	for _, rec := range lost {
		r.c.Log.Warn("job lost", "job", rec.ID, "node", rec.Node)
		r.c.Event(api.Event{Kind: "lost", Job: rec.ID, UID: &rec.UID, From: rec.Node, Why: "its node was declared dead"})
	}
}
