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

// A CRIU that never answers is killed at the time limit: the restore
// returns an error saying so, and no CRIU is left running.
func TestCRIUTimeLimit(t *testing.T) {
	dir := t.TempDir()
	hang := filepath.Join(dir, "criu")
	if err := os.WriteFile(hang, []byte("#!/bin/sh\nexec sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	images := filepath.Join(dir, "images")
	if err := os.Mkdir(images, 0o700); err != nil {
		t.Fatal(err)
	}
	c := CRIU{Path: hang, ExecMu: &sync.Mutex{}, Timeout: 300 * time.Millisecond}
	before := procfs.Children(os.Getpid())
	start := time.Now()
	_, _, err := c.Restore(RestoreOpts{Dir: images})
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), "no answer within 300ms") {
		t.Fatalf("restore: %v", err)
	}
	if took > 5*time.Second {
		t.Fatalf("took %v", took)
	}
	for _, p := range procfs.Children(os.Getpid()) {
		if !contains(before, p) && syscall.Kill(p, 0) == nil {
			if st, err := procfs.ReadStat(p); err == nil && st.State != 'Z' {
				t.Fatalf("child %d still runs", p)
			}
		}
	}
	t.Logf("killed after %v: %v", took.Round(time.Millisecond), err)
}

func contains(s []int, x int) bool {
	for _, v := range s {
		if v == x {
			return true
		}
	}
	return false
}
