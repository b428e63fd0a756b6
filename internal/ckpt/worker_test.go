package ckpt

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// A worker killed mid-request ends roam's read of its answer, however
// many children other goroutines start meanwhile (each under ExecMu, as
// the agent's do): no other child holds the worker's end of the socket.
// One that did (the worker's end inheritable from its creation, before
// ExecMu was taken) left the read waiting for as long as that child
// lived: the chaos run's migration whose CRIU it killed never returned.
func TestKilledWorkerEndsItsCall(t *testing.T) {
	criu := filepath.Join(t.TempDir(), "criu")
	if err := os.WriteFile(criu, []byte("#!/bin/sh\nexec sleep 60\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c := &CRIU{Path: criu, ExecMu: &sync.Mutex{}}
	stop := make(chan struct{})
	var others []*exec.Cmd
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // another goroutine's children, started one after another
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			cmd := exec.Command("sleep", "60")
			c.ExecMu.Lock()
			err := cmd.Start()
			c.ExecMu.Unlock()
			if err == nil {
				mu.Lock()
				others = append(others, cmd)
				mu.Unlock()
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		wg.Wait()
		for _, cmd := range others {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	for i := range 30 {
		w, _, err := c.startWorker(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		_ = w.cmd.Process.Kill()
		_ = w.cmd.Wait()
		read := make(chan error, 1)
		go func() {
			_, err := w.sk.Read(make([]byte, 64))
			read <- err
		}()
		select {
		case <-read:
		case <-time.After(5 * time.Second):
			t.Fatalf("worker %d killed: the read of its answer still waits after 5 s (another child holds its end)", i)
		}
		w.sk.Close()
	}
}
