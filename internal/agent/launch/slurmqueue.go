package launch

// Pending jobs of a Slurm allocation that ended. A sweep run inside an
// allocation keeps some of its jobs pending in the home's queue
// (JobsPerCPU); when Slurm ends the job (scancel, its time limit), it
// kills what runs in the job's groups, and the home hears of those, but
// nothing tells it of the pending ones: started, each would wait for an
// extern step that is gone and be refused, again and again. So the home
// asks the controller, at most once every slurmCheckEvery for each Slurm
// job with jobs pending, and ends them, as a kill before their start,
// once it says the job is no longer running (or does not know it). It
// asks at once (at most once every slurmEndAsk) when a running job of
// such a sweep ended: Slurm's end of the job kills the running ones
// first, and the places they free would otherwise take pending ones into
// the dying allocation (seen: one started there and was killed with it).

import (
	"errors"
	"syscall"
	"time"

	"roam/internal/queue"
	"roam/internal/slurm"
)

// slurmCheckEvery bounds how often the home asks the controller after
// the Slurm job of pending jobs: a pending job of an ended allocation
// waits that long at most (plus the question's AskTimeout) before it
// ends, and a sweep's queue costs the controller one question a period.
const slurmCheckEvery = 10 * time.Second

// slurmEndAsk bounds the questions a sweep's ending jobs ask: a sweep of
// short jobs ends several a second.
const slurmEndAsk = time.Second

// orphans is what the release loop keeps for endOrphans: when the
// controller was asked after each Slurm job, and how many jobs of each
// group ran at the last round.
type orphans struct {
	asked   map[string]time.Time
	running map[string]int
}

func newOrphans() *orphans {
	return &orphans{asked: map[string]time.Time{}, running: map[string]int{}}
}

// slurmRunning are the job states in which an allocation's pending jobs
// may still start.
var slurmRunning = map[string]bool{"RUNNING": true, "CONFIGURING": true, "SUSPENDED": true}

// endOrphans ends the pending jobs of the groups of gs whose Slurm job
// ended, asking the controller of each at most once every
// slurmCheckEvery, or slurmEndAsk once a job of the group ended (o: the
// release loop's own), and returns the other groups.
func (s *Starter) endOrphans(gs []queue.Group, o *orphans, now time.Time) []queue.Group {
	if s.cfg.Slurm == nil {
		return gs
	}
	ended := map[string]bool{}
	out := gs[:0]
	running := map[string]int{}
	for _, g := range gs {
		running[g.Key] = g.Running
		since := now.Sub(o.asked[g.Slurm])
		ask := since >= slurmCheckEvery || since >= slurmEndAsk && g.Running < o.running[g.Key]
		if g.Slurm != "" && len(g.Pending) > 0 && !ended[g.Slurm] && ask {
			o.asked[g.Slurm] = now
			ended[g.Slurm] = s.slurmEnded(g.Slurm)
		}
		if !ended[g.Slurm] || g.Slurm == "" {
			out = append(out, g)
			continue
		}
		ids := make([]string, len(g.Pending))
		for i, j := range g.Pending {
			ids[i] = j.ID
		}
		if _, _, err := s.cfg.Jobs.EndPending(ids, int(syscall.SIGKILL), now); err != nil {
			s.cfg.Log.Error("job table", "err", err)
		}
		s.cfg.Log.Info("queue: Slurm job ended: its pending jobs end unstarted", "slurm", g.Slurm, "jobs", len(ids))
	}
	for id, at := range o.asked {
		if now.Sub(at) > 2*slurmCheckEvery {
			delete(o.asked, id)
		}
	}
	o.running = running
	return out
}

// slurmEnded says whether the controller says Slurm job id ended: it
// does not know it, or it is in no running state. A question that
// failed says no: the pending jobs wait for the next.
func (s *Starter) slurmEnded(id string) bool {
	_, j, err := s.cfg.Slurm(0, id)
	switch {
	case errors.Is(err, slurm.ErrRefused):
		return true
	case err != nil:
		s.cfg.Log.Warn("queue: asking after a Slurm job failed; its pending jobs wait", "slurm", id, "err", err)
		return false
	}
	return !slurmRunning[j.State]
}
