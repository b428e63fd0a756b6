package main

import (
	"os"
	"path/filepath"
	"strconv"
	"time"

	"roam/internal/ckpt"
)

// holdEnv names a directory: with it set, every checkpoint waits before
// its freeze until a test lets it go (see holdCheckpoints). For the tests
// of what happens between a checkpoint's checks and its freeze
// (test/e2e); a real node never sets it.
const holdEnv = "ROAMD_TEST_HOLD_CHECKPOINT"

// holdCheckpoints is a Checkpointer whose Checkpoint, after the checks of
// the job and before the freeze, writes dir/PID.held and waits, at most a
// minute, until dir/PID.go exists.
type holdCheckpoints struct {
	ckpt.Checkpointer
	dir string
}

func (h holdCheckpoints) Checkpoint(id string, pid int, dir string, mounts []string) error {
	name := filepath.Join(h.dir, strconv.Itoa(pid))
	if err := os.WriteFile(name+".held", nil, 0o600); err == nil {
		for end := time.Now().Add(time.Minute); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			if _, err := os.Stat(name + ".go"); err == nil {
				break
			}
		}
	}
	return h.Checkpointer.Checkpoint(id, pid, dir, mounts)
}

// withHold is c, held as holdEnv says, or c itself.
func withHold(c ckpt.Checkpointer) ckpt.Checkpointer {
	if dir := os.Getenv(holdEnv); dir != "" {
		return holdCheckpoints{c, dir}
	}
	return c
}
