package scontrol

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
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
	cmd := exec.CommandContext(ctx, "scontrol", "show", "job", "-o", id)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return time.Time{}, false, fmt.Errorf("scontrol show job %s: %v: %s", id, err, strings.TrimSpace(errOut.String()))
	}
	return slurm.EndTime(out.String(), id, time.Local)
}
