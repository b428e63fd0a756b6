package job

import (
	"os/exec"
	"testing"
	"time"

	"roam/internal/procfs"
)

// TreeActivity counts the runnable threads of a job's processes but not
// those of its root (the job's roam-init, which only waits, and is
// runnable for a while after a restore): a busy root with one busy child
// is one runnable thread. The loops end with the test's process.
func TestTreeActivityLeavesOutTheRoot(t *testing.T) {
	c := exec.Command("sh", "-c", `sh -c 'while kill -0 $PPID 2>/dev/null; do :; done' & while kill -0 $PPID 2>/dev/null; do :; done`)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Process.Kill()
		_ = c.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for len(procfs.Tree(c.Process.Pid)) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the child never started: tree %v", procfs.Tree(c.Process.Pid))
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Both loops are always runnable (running or waiting for a CPU):
	// counted with the root, a sample would show 2.
	most := 0
	for range 20 {
		run, _, _ := TreeActivity(c.Process.Pid)
		most = max(most, run)
		time.Sleep(5 * time.Millisecond)
	}
	if most != 1 {
		t.Fatalf("up to %d runnable threads in a busy root with one busy child, want 1 (the child's)", most)
	}
}
