package scontrol

import (
	"context"
	"time"

	"roam/internal/slurm"
)

// End asks the controller when job id ends (its time limit), with the
// scontrol on PATH and the caller's SLURM_CONF: what a process inside the
// job may ask of its own job. ok is false when Slurm gives no end.
func End(ctx context.Context, id string) (end time.Time, ok bool, err error) {
	if err := slurm.ValidJobID(id); err != nil {
		return time.Time{}, false, err
	}
	out, _, err := showJob(ctx, "", "", id, nil)
	if err != nil {
		return time.Time{}, false, err
	}
	return slurm.EndTime(out, id, time.Local)
}
