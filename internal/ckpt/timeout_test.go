package ckpt

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"roam/internal/procfs"
)

// A CRIU that never answers is killed at the time limit, in a dump (which
// would hold the job frozen) as in a restore: each returns an error saying
// so, and no CRIU is left running.
func TestCRIUTimeLimit(t *testing.T) {
	dir := t.TempDir()
	hang := filepath.Join(dir, "criu")
	if err := os.WriteFile(hang, []byte("#!/bin/sh\nexec sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := CRIU{Path: hang, ExecMu: &sync.Mutex{}, Timeout: 300 * time.Millisecond}
	for _, step := range []struct {
		name string
		call func(images string) error
	}{
		{"restore", func(images string) error { _, _, err := c.Restore(RestoreOpts{Dir: images}); return err }},
		{"dump", func(images string) error { _, err := c.Dump(DumpOpts{PID: os.Getpid(), Dir: images}); return err }},
	} {
		images := filepath.Join(dir, step.name)
		if err := os.Mkdir(images, 0o700); err != nil {
			t.Fatal(err)
		}
		before := procfs.Children(os.Getpid())
		start := time.Now()
		err := step.call(images)
		took := time.Since(start)
		if err == nil || !strings.Contains(err.Error(), "criu "+step.name+": no answer within 300ms") {
			t.Fatalf("%s: %v", step.name, err)
		}
		if took > 5*time.Second {
			t.Fatalf("%s took %v", step.name, took)
		}
		for _, p := range procfs.Children(os.Getpid()) {
			if !contains(before, p) && syscall.Kill(p, 0) == nil {
				if st, err := procfs.ReadStat(p); err == nil && st.State != 'Z' {
					t.Fatalf("%s: child %d still runs", step.name, p)
				}
			}
		}
		t.Logf("%s: killed after %v: %v", step.name, took.Round(time.Millisecond), err)
	}
}

func contains(s []int, x int) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}

// A restore killed at its time limit leaves nothing running: not CRIU's
// processes, and not the restored tasks that took a session of their own
// in the PID namespace CRIU made for the job (a kill of CRIU's process
// group missed them, and they waited for good for a CRIU that had gone).
// The stand-in for CRIU here starts such a task, PID 1 of a new PID
// namespace in a session of its own, and hangs.
func TestCRIUTimeLimitKillsTheRestoredTree(t *testing.T) {
	dir := t.TempDir()
	hang := filepath.Join(dir, "criu")
	pidFile := filepath.Join(dir, "unshare.pid")
	script := "#!/bin/sh\nunshare --pid --fork setsid sleep 600 </dev/null >/dev/null 2>&1 &\necho $! > " + pidFile + "\nexec sleep 600\n"
	if err := os.WriteFile(hang, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c := CRIU{Path: hang, ExecMu: &sync.Mutex{}, Timeout: time.Second}
	images := filepath.Join(dir, "images")
	if err := os.Mkdir(images, 0o700); err != nil {
		t.Fatal(err)
	}
	// The restored task, once it runs: the child of unshare, in another
	// PID namespace, in its own session.
	restored := make(chan int, 1)
	go func() {
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
			b, err := os.ReadFile(pidFile)
			if err != nil {
				continue
			}
			var u int
			if _, err := fmt.Sscan(string(b), &u); err != nil {
				continue
			}
			if kids := procfs.Children(u); len(kids) == 1 {
				if n, ok := procfs.NSPid(kids[0]); ok && n == 1 {
					restored <- kids[0]
					return
				}
			}
		}
		restored <- 0
	}()
	_, _, err := c.Restore(RestoreOpts{Dir: images})
	if err == nil || !strings.Contains(err.Error(), "no answer within 1s") {
		t.Fatalf("restore: %v", err)
	}
	pid := <-restored
	if pid == 0 {
		t.Fatal("the stand-in's restored task never ran")
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	for end := time.Now().Add(5 * time.Second); procfs.Running(pid); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("the restored task %d outlived the killed restore", pid)
		}
	}
}
