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
	"sync"

	"roam/internal/execlock"
	"roam/internal/slurm"
)

// Show asks the controller of the cluster whose slurm.conf is conf ("":
// Slurm's default) about job id, with scontrol (prog; "": from PATH), and
// parses its answer. execMu, when set, is held while scontrol starts
// (ckpt.CRIU.ExecMu: a child started meanwhile inherits what a restore
// hands CRIU).
func Show(ctx context.Context, prog, conf, id string, execMu *sync.Mutex) (slurm.Job, error) {
	if err := slurm.ValidJobID(id); err != nil {
		return slurm.Job{}, err
	}
	out, errOut, err := showJob(ctx, prog, conf, id, execMu, "-d")
	if err != nil {
		if strings.Contains(errOut, "Invalid job id") {
			return slurm.Job{}, fmt.Errorf("%w: %s: job %s: no such job", slurm.ErrRefused, slurm.Field, id)
		}
		return slurm.Job{}, err
	}
	return slurm.FindJob(out, id)
}

// showJob runs `scontrol show job -o [extra...] id` (prog "": scontrol from
// PATH; conf "": the caller's SLURM_CONF or Slurm's default) and returns its
// output; its error names the command and carries scontrol's stderr.
func showJob(ctx context.Context, prog, conf, id string, execMu *sync.Mutex, extra ...string) (out, errOut string, err error) {
	if prog == "" {
		prog = "scontrol"
	}
	args := append(append([]string{"show", "job", "-o"}, extra...), id)
	cmd := exec.CommandContext(ctx, prog, args...)
	cmd.Env = os.Environ()
	if conf != "" {
		cmd.Env = append(cmd.Env, "SLURM_CONF="+conf)
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	if err = execlock.Start(cmd, execMu); err == nil {
		err = cmd.Wait()
	}
	if err != nil {
		return "", e.String(), fmt.Errorf("scontrol show job %s: %v: %s", id, err, strings.TrimSpace(e.String()))
	}
	return o.String(), e.String(), nil
}
