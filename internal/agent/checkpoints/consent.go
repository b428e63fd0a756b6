package checkpoints

// The home's side of a restart's run: its consent, its commit and the
// news of its failure. Never two copies: a run needs the home's consent,
// which it gives only to a job that does not run (ended, lost, or running
// on a node declared dead) and no other run holds, once per run, and
// which raises the job's incarnation (Inc) in its record before any copy
// is restored. From then on the home takes news only of the new
// incarnation: a copy of an older one (the old node was cut off, not
// dead, and comes back) gets "gone" at its first push, so its node kills
// it, and its output and exit status are dropped (the relay). The home
// cuts its copy of the output back to the checkpoint's offsets: the
// restored job writes on from there.

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/agent/relay"
	"roam/internal/agent/reopen"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/migrate"
	"roam/internal/sched"
)

// Reopen is peer.Reopen, the home's consent to run req.MID: it checks
// that the job does not run and no other run holds it, and makes its
// record say it runs on req.On, as a new incarnation, its output cut back
// to the checkpoint's. The same run asking again gets the same answer: a
// consent it was given, or a refusal, which its run took as the end of
// it (a copy of a refused request that arrives late, once the job has
// stopped, would otherwise mark the job as being restarted by a run that
// has gone, and refuse every other restart until the mark expires).
func (c *Checkpoints) Reopen(req reopen.Request) (reopen.Consent, error) {
	if !migrate.ValidMID(req.MID) {
		return reopen.Consent{}, errkind.New(peer.ErrBadRequest, "restart run id %q", req.MID)
	}
	if ans, again, err := c.cfg.Jobs.ConsentFor(req.ID, req.MID); again || err != nil {
		return ans, err
	}
	if strings.HasPrefix(req.Why, turnAgain) && !c.preemptedHere(req.ID) {
		// The queue's restore of a job it preempted: one killed, or
		// restored, meanwhile stays as it is.
		c.cfg.Jobs.RefuseRun(req.MID)
		return reopen.Consent{}, errkind.New(peer.ErrBadRequest, "job %s: its home's queue restores it only while it waits preempted", req.ID)
	}
	ans, err := c.consent(req)
	if err != nil {
		c.cfg.Jobs.RefuseRun(req.MID)
	}
	return ans, err
}

// consent is Reopen's judgement of a run it has not answered before.
func (c *Checkpoints) consent(req reopen.Request) (reopen.Consent, error) {
	if h, ok := migrate.JobHome(req.ID); !ok {
		return reopen.Consent{}, errkind.New(peer.ErrBadRequest, "job id %q", req.ID)
	} else if h != c.cfg.Self && c.cfg.Members.Known(h) {
		return reopen.Consent{}, errkind.New(peer.ErrBadRequest, "job %s has its home on node %s, not here", req.ID, h)
	}
	if err := req.Meta.Validate(); err != nil {
		return reopen.Consent{}, errkind.New(peer.ErrBadRequest, "%v", err)
	}
	if len(req.Owner.Groups) > migrate.MaxGroups {
		return reopen.Consent{}, errkind.New(peer.ErrBadRequest, "%d supplementary groups", len(req.Owner.Groups))
	}
	if !migrate.ValidEvery(req.Every) {
		return reopen.Consent{}, errkind.New(peer.ErrBadRequest, "checkpoint interval %v", req.Every)
	}
	if err := c.fenced(req); err != nil {
		return reopen.Consent{}, err
	}
	target, err := c.target(req)
	if err != nil {
		return reopen.Consent{}, err
	}
	id, had, err := c.cfg.Jobs.RestartID(req, c.cfg.Self)
	if err != nil {
		return reopen.Consent{}, err
	}
	// A user's restart is one more live job of theirs here: under the
	// run limits as a run is. A home's own restart of a job of a dead
	// node, or of one its queue preempted, is the same live job.
	if req.Lost == "" && !c.preemptedHere(req.ID) {
		if err := c.cfg.CheckRun(req.Owner.UID, req.Meta.Job.Argv, req.Meta.Job.Env); err != nil {
			return reopen.Consent{}, err
		}
	}
	fresh := id == "" // a new id, which no record may hold
	if fresh {
		seq, err := c.cfg.Store.NextSeqs(1)
		if err != nil {
			return reopen.Consent{}, err
		}
		id = fmt.Sprintf("%s.%d", c.cfg.Self, seq)
	} else if !had {
		_, seq, _ := migrate.JobSeq(id)
		if err := c.cfg.Store.BumpSeq(seq); err != nil {
			return reopen.Consent{}, err
		}
	}
	now := time.Now()
	next, ans, err := c.cfg.Jobs.Reopen(req, reopen.Consent{ID: id, Node: target, Home: c.cfg.Self, HomeAddr: c.cfg.Peers.SelfAddr}, fresh, had, now)
	if err != nil {
		return reopen.Consent{}, err
	}
	uid := next.UID
	go c.cfg.Event(api.Event{At: now, Kind: "restart", Job: id, UID: &uid, From: req.Meta.Node, To: target,
		Why: fmt.Sprintf("%s, from the checkpoint of %s", req.Why, req.Meta.At.Format(time.RFC3339))})
	return ans, nil
}

// fenced refuses a user's restart of a job lost with its node while that
// node may still run it: the node may be cut off, not dead, and a job
// whose owner holds a checkpoint of it is fenced there (job.Local.
// Checkpointed), killed by fence.kill+fence.margin after this home last
// heard from it. (The home's own restarts of a lost node's jobs wait so
// in the lost-job sweep.)
func (c *Checkpoints) fenced(req reopen.Request) error {
	rec, err := c.cfg.Jobs.HomeRecord(req.ID)
	if err != nil || req.Lost != "" || rec.State != job.StateLost || rec.Node == "" {
		return nil
	}
	until := c.cfg.Fence.RestartAt(c.cfg.Jobs.HeardFrom()[rec.Node], c.cfg.Started(), c.cfg.Members.FenceKill(rec.Node))
	if time.Now().Before(until) {
		return errkind.New(peer.ErrUnavailable, "job %s was lost with node %s, which may still run it until %s (fence.kill + fence.margin after this home last heard from it): restart it then",
			req.ID, rec.Node, until.Format(time.RFC3339))
	}
	return nil
}

// target is the node run req restores on, as the home consents to it.
func (c *Checkpoints) target(req reopen.Request) (string, error) {
	// The run holds the job's room on its node already (the arbiter of
	// that room): here, it is not counted against the job.
	held := float64(c.cfg.Jobs.MemHeld(req.ID))/(1<<20) + c.cfg.Admitted(req.ID)
	targets, _, err := c.cfg.Members.Place(req.On, 1, c.cfg.Draining(), req.Meta.Job.Req, held, req.Meta.CPU, nil)
	if err != nil && req.On != "" && c.preemptedHere(req.ID) && errors.Is(err, sched.ErrNoRoom) {
		// Placed by this home's queue, whose view of that node's room
		// may count the run's own hold already.
		targets, err = []string{req.On}, nil
	}
	if err != nil {
		return "", err
	}
	if len(targets) == 0 || targets[0] == req.Lost {
		return "", errkind.New(peer.ErrUnavailable, "no live node to restart job %s on", req.ID)
	}
	return targets[0], nil
}

// Commit is peer.ReopenCommit: run req.MID holds its copy stopped; the
// answer is the home's decision (migrate.Outcome).
func (c *Checkpoints) Commit(req reopen.Commit) (map[string]string, error) {
	if !migrate.ValidMID(req.MID) {
		return nil, errkind.New(peer.ErrBadRequest, "restart run id %q", relay.LimitText(req.MID))
	}
	return map[string]string{"outcome": string(c.cfg.Jobs.CommitRestart(req.ID, req.MID))}, nil
}

// Failed is peer.ReopenDone: run d.MID failed, and nothing of it runs.
func (c *Checkpoints) Failed(d reopen.Failed) (struct{}, error) {
	if !migrate.ValidMID(d.MID) {
		return struct{}{}, errkind.New(peer.ErrBadRequest, "restart run id %q", relay.LimitText(d.MID))
	}
	c.log.Warn("restart failed", "job", relay.LimitText(d.ID), "mid", d.MID, "err", relay.LimitText(d.Error))
	return struct{}{}, c.cfg.Jobs.ReopenEnded(d, time.Now())
}
