package scontrol

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Show starts scontrol only while it holds the exec lock it is given
// (ckpt.CRIU.ExecMu), as every child of the agent starts: one started
// while CRIU's worker starts would inherit what a restore hands CRIU. It
// answers once the lock is free, with the job scontrol printed.
func TestShowStartsUnderTheExecLock(t *testing.T) {
	dir := t.TempDir()
	ran := filepath.Join(dir, "ran")
	prog := filepath.Join(dir, "scontrol")
	script := "#!/bin/sh\ntouch " + ran + "\necho 'JobId=42 JobName=x UserId=u(70001) JobState=RUNNING NodeList=n[1-2]'\n"
	if err := os.WriteFile(prog, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	mu.Lock()
	done := make(chan error, 1)
	go func() {
		j, err := Show(context.Background(), prog, "", "42", &mu)
		if err == nil && j.State != "RUNNING" {
			t.Errorf("job state %q, want RUNNING", j.State)
		}
		done <- err
	}()
	time.Sleep(300 * time.Millisecond) // long enough for a start that does not wait
	if _, err := os.Stat(ran); err == nil {
		t.Fatal("scontrol ran while the exec lock was held")
	}
	mu.Unlock()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Show did not answer once the exec lock was free")
	}
	if _, err := os.Stat(ran); err != nil {
		t.Fatalf("scontrol never ran: %v", err)
	}
}
