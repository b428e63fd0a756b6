// Package scontrol is the thin call of Slurm's scontrol that package slurm,
// which is pure, leaves to its callers.
package scontrol

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"roam/internal/slurm"
)

// Show asks the controller of the cluster whose slurm.conf is conf ("":
// Slurm's default) about job id, with scontrol (prog; "": from PATH), and
// parses its answer.
func Show(ctx context.Context, prog, conf, id string) (slurm.Job, error) {
	if err := slurm.ValidJobID(id); err != nil {
		return slurm.Job{}, err
	}
	if prog == "" {
		prog = "scontrol"
	}
	cmd := exec.CommandContext(ctx, prog, "show", "job", "-o", "-d", id)
	cmd.Env = os.Environ()
	if conf != "" {
		cmd.Env = append(cmd.Env, "SLURM_CONF="+conf)
	}
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		if strings.Contains(errOut.String(), "Invalid job id") {
			return slurm.Job{}, fmt.Errorf("%w: %s: job %s: no such job", slurm.ErrRefused, slurm.Field, id)
		}
		return slurm.Job{}, fmt.Errorf("scontrol show job %s: %v: %s", id, err, strings.TrimSpace(errOut.String()))
	}
	return slurm.FindJob(out.String(), id)
}
