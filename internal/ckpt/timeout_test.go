package ckpt

import (
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
