package launch

// Pending jobs of a Slurm allocation that ended. A sweep run inside an
// allocation keeps some of its jobs pending in the home's queue
// (JobsPerCPU); when Slurm ends the job (scancel, its time limit), it
// kills what runs in the job's groups, and the home hears of those, but
// nothing tells it of the pending ones: started, each would wait for an
// extern step that is gone and be refused, again and again. So the home
// asks the controller, at most once every slurmCheckEvery for each Slurm
// job with jobs pending, and ends them, as a kill before their start,
// once it says the job is no longer running (or does not know it).

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

// slurmRunning are the job states in which an allocation's pending jobs
// may still start.
var slurmRunning = map[string]bool{"RUNNING": true, "CONFIGURING": true, "SUSPENDED": true}

// endOrphans ends the pending jobs of the groups of gs whose Slurm job
// ended, asking the controller of each at most once every
// slurmCheckEvery (asked: when each was asked last, the release loop's
// own), and returns the other groups.
func (s *Starter) endOrphans(gs []queue.Group, asked map[string]time.Time, now time.Time) []queue.Group {
	if s.cfg.Slurm == nil {
		return gs
	}
	ended := map[string]bool{}
	out := gs[:0]
	for _, g := range gs {
		if g.Slurm != "" && len(g.Pending) > 0 && !ended[g.Slurm] && now.Sub(asked[g.Slurm]) >= slurmCheckEvery {
			asked[g.Slurm] = now
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
	for id, at := range asked {
		if now.Sub(at) > 2*slurmCheckEvery {
			delete(asked, id)
		}
	}
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
