package checkpoints

// The keeper's sweep of the checkpoints it keeps: a job's kept
// checkpoint is dropped when its job ends (DropOn, one try) and, should
// that drop be lost (the keeper was down or cut off, the home restarted
// before it sent it, the job was purged), by this sweep, which asks each
// kept job's home every limits.checkpoint_sweep whether the job still
// runs: so no user's memory image outlives its job by more than one
// sweep, and none outlives its file's expiry.

import (
	"errors"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/job"
)

// SweepLoop sweeps the kept checkpoints every period until stop is
// closed.
func (c *Checkpoints) SweepLoop(stop <-chan struct{}) {
	t := time.NewTicker(c.cfg.Sweep)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		c.Sweep(stop)
	}
}

// Sweep drops each kept checkpoint past its expiry, or whose job's home
// says the job has finished or it knows no such job (purged, or never
// restarted from it); a home that does not answer keeps its jobs' files
// to the next sweep (or their expiry). A lost job's is kept: its node
// may come back without it (its fence killed it), or its home be trying
// to restart it from this file (RestartLost); its record's expiry ends
// it (purged).
func (c *Checkpoints) Sweep(stop <-chan struct{}) {
	for _, f := range c.cfg.Keeper.KeptFiles() {
		select {
		case <-stop:
			return
		default:
		}
		why := ""
		if time.Now().After(f.Expires) {
			why = "its file expired"
		} else if rec, err := c.cfg.Record(f.ID); errors.Is(err, peer.ErrNotFound) {
			why = "its home knows no such job"
		} else if err == nil && rec.State == job.StateFinished {
			why = "its job has " + rec.State
		}
		if why == "" {
			continue
		}
		if err := c.cfg.Keeper.Drop(f.ID, time.Time{}); err != nil {
			c.log.Warn("kept checkpoint not dropped", "job", f.ID, "err", err)
			continue
		}
		c.log.Info("kept checkpoint dropped", "job", f.ID, "uid", f.UID, "bytes", f.Bytes, "why", why)
	}
}
