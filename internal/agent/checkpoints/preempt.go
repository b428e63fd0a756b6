package checkpoints

// Preemption, the node's side: a home whose queue has fresh jobs of a
// sweep waiting for room asks each node running that sweep's jobs to
// preempt some (peer.CkptPreempt). The node judges which (package
// queue, Preempt, with each job's CPU, which only it knows), checkpoints
// each with --stop semantics through the source machine, keeps the file
// here, and ends the job as preempted (job.EndPreempted): its home makes
// it pending again, and restarts it from the file (peer.CkptRestore)
// when its turn comes. A checkpoint that fails thaws the job, which runs
// on where it was, and its note (a failed checkpoint in its record) keeps
// its home from asking again.

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"time"

	"roam/internal/agent/keeper"
	"roam/internal/agent/peer"
	"roam/internal/agent/reopen"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/load"
	"roam/internal/migrate"
	"roam/internal/queue"
	"roam/internal/sched"
)

// Preempt is peer.CkptPreempt: it begins the preemptions queue.Preempt
// picks of req's jobs running here, and answers at once with them.
func (c *Checkpoints) Preempt(req peer.PreemptRequest) (peer.PreemptAnswer, error) {
	if err := validPreempt(req); err != nil {
		return peer.PreemptAnswer{}, errkind.New(peer.ErrBadRequest, "preempt: %v", err)
	}
	const key = "g" // the request's jobs are of one group
	in := queue.PreemptInput{After: req.After, Short: map[string]int{key: req.Max}, NeedMB: map[string]float64{key: req.NeedMB},
		RoomMB: map[string]float64{c.cfg.Self: req.RoomMB}}
	refs, _ := c.cfg.Jobs.Refs()
	for _, r := range refs {
		l := r.Rec
		if l.Home != req.Home || r.Done || !slices.Contains(req.IDs, l.ID) {
			continue
		}
		run := queue.Run{ID: l.ID, Node: c.cfg.Self, Key: key, MemMB: l.Req.MemMB(), Preempting: r.Migrating, Held: r.Unmovable}
		switch l.Hold {
		case migrate.HoldPin:
			run.Held = "pinned (run --pin)"
		case migrate.HoldManual:
			run.Held = "placed by hand"
		}
		run.CPU = time.Duration(c.cfg.Attained(l) * float64(time.Second))
		in.Runs = append(in.Runs, run)
	}
	var ans peer.PreemptAnswer
	for _, p := range queue.Preempt(in) {
		ans.IDs = append(ans.IDs, p.ID)
		go c.preempt(p)
	}
	return ans, nil
}

// validPreempt checks a request from a peer.
func validPreempt(req peer.PreemptRequest) error {
	switch {
	case req.Home == "" || len(req.Home) > maxWhy:
		return fmt.Errorf("home %q", req.Home)
	case len(req.IDs) == 0 || len(req.IDs) > peer.MaxPreemptIDs:
		return fmt.Errorf("ids: %d jobs, not 1..%d", len(req.IDs), peer.MaxPreemptIDs)
	case req.Max < 1 || req.Max > len(req.IDs):
		return fmt.Errorf("max %d is not 1..%d (the jobs named)", req.Max, len(req.IDs))
	case req.After < sched.MinPreemptAfter || req.After > sched.MaxPreemptAfter:
		return fmt.Errorf("after %v is not %v..%v", req.After, sched.MinPreemptAfter, sched.MaxPreemptAfter)
	case !memMB(req.NeedMB) || req.NeedMB == 0:
		return fmt.Errorf("need_mb %v is not in (0, %d]", req.NeedMB, load.MaxMemMB)
	case !memMB(req.RoomMB):
		return fmt.Errorf("room_mb %v is not in [0, %d]", req.RoomMB, load.MaxMemMB)
	}
	for _, id := range req.IDs {
		if h, ok := migrate.JobHome(id); !ok || h != req.Home {
			return fmt.Errorf("ids: job %q is not of home %q", id, req.Home)
		}
	}
	return nil
}

// memMB says v is a memory size in MiB a load entry may carry.
func memMB(v float64) bool { return !math.IsNaN(v) && v >= 0 && v <= load.MaxMemMB }

// preempt checkpoints job p, running here, keeps the file here, and ends
// the job as preempted once the file is kept (the source machine's
// --stop: the job stays frozen from its dump to its end, so nothing it
// does after the checkpoint is lost). A failure leaves it running.
func (c *Checkpoints) preempt(p queue.Preemption) {
	start := time.Now()
	f, err := c.cfg.Save(p.ID, true, job.EndPreempted, func(f keeper.File) (string, error) {
		return c.cfg.Self, c.cfg.Keeper.Keep(p.ID, f)
	})
	if err != nil {
		if !errors.Is(err, peer.ErrNotFound) {
			c.log.Warn("preemption: checkpoint failed; the job runs on", "job", p.ID, "err", err)
		}
		return
	}
	uid := f.Bind.UID
	c.cfg.Event(api.Event{Kind: "preempt", Job: p.ID, UID: &uid, From: c.cfg.Self,
		Why: fmt.Sprintf("had %.2f CPU-s while fresh jobs of its sweep waited for room: checkpointed (%d bytes, frozen %.0f ms), to run again after them",
			p.CPU.Seconds(), f.Size, f.Meta.FreezeMS)})
	c.log.Info("preempted", "job", p.ID, "cpu_s", p.CPU.Seconds(), "bytes", f.Size, "total_ms", float64(time.Since(start).Microseconds())/1000)
}

// turnAgain begins the why of the queue's restore of a job it
// preempted, which the home's consent knows it by.
const turnAgain = "its turn again in its home's queue"

// RestorePreempted restarts job rec, which its home's queue preempted,
// on node, from the checkpoint its node kept (rec.Newest): the keeper
// sends the file there, whose run asks this home's consent as any
// restart's does. It returns once the run ended.
func (c *Checkpoints) RestorePreempted(rec job.Record, node string) error {
	if rec.Newest == nil || rec.Newest.StoredOn == "" {
		return errkind.New(peer.ErrNotFound, "job %s: no checkpoint of its preemption is kept", rec.ID)
	}
	req := reopen.Target{ID: rec.ID, Home: c.cfg.Self, On: node,
		Why: fmt.Sprintf("%s (preempted after %.2f CPU-s)", turnAgain, rec.Used.CPUSeconds)}
	return c.cfg.Peers.CallWithin(c.cfg.CallTimeout, rec.Newest.StoredOn, http.MethodPost, peer.CkptRestore, req, nil)
}

// preemptedHere says job id is homed here, pending since its home's
// queue preempted it: its restart is the same live job of its user, not
// one more.
func (c *Checkpoints) preemptedHere(id string) bool {
	rec, err := c.cfg.Jobs.HomeRecord(id)
	return err == nil && rec.State == job.StatePending && !rec.Preempted.IsZero()
}
