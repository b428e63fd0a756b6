package bench

// The migration benchmark's local dump-and-restore baseline runs CRIU in
// a helper program, bin/roam-ckpt (cmd/roam-ckpt), so that the CLI links no
// daemon code (no package ckpt, no go-criu).

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strings"

	"roam/internal/api"
	"roam/internal/emu"
)

// localDumpRestore dumps the job where it runs (node n) to that node's
// state directory and restores a second copy from the images, as a node
// would without the network; the copy is then killed and the job resumed.
// spec.Ckpt does it, in the node's network and mount namespaces, as the
// node's agent runs CRIU (from another network namespace CRIU would try
// to dump and lock the network): it is started there as emu starts the
// agents.
func localDumpRestore(n emu.NodeState, spec MigrateSpec, id string) (localResult, error) {
	var r localResult
	if spec.Ckpt == "" {
		return r, errors.New("no roam-ckpt binary given")
	}
	args := []string{"--net=/run/netns/" + n.Netns, spec.Ckpt, "--node-dir", n.Dir}
	if n.PID > 0 {
		// And in the agent's mount namespace, where CRIU finds the
		// kernel facts it cached (ckpt.KerndatDir), as the agent's does.
		args = append([]string{fmt.Sprintf("--mount=/proc/%d/ns/mnt", n.PID)}, args...)
	}
	if spec.CRIU != "" {
		args = append(args, "--criu", spec.CRIU)
	}
	args = append(args, id)
	cmd := exec.Command("nsenter", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return r, errors.New(msg)
		}
		return r, fmt.Errorf("%s: %w", spec.Ckpt, err)
	}
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil || r.DumpMS <= 0 || r.RestoreMS <= 0 {
		return r, fmt.Errorf("%s printed %q, not its dump and restore times", spec.Ckpt, tail(strings.TrimSpace(stdout.String())))
	}
	return r, nil
}

// localResult is what roam-ckpt prints: the dump's and the restore's
// times, and their parts.
type localResult struct {
	DumpMS    float64     `json:"dump_ms"`
	RestoreMS float64     `json:"restore_ms"`
	Dump      []api.Phase `json:"dump"`
	Restore   []api.Phase `json:"restore"`
}
