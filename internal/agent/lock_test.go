package agent

import (
	"os"
	"path/filepath"
	"roam/internal/agent/jobtable"
	"roam/internal/agent/relay"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The job lock is not held while a spool is read or written: a spool
// file that blocks every open (a FIFO with no other end, standing in for
// a disk that does not answer) stops the push or the update that touches
// it, and nothing else. With the old code, which read and wrote spools
// under the lock, both checks below time out.
func TestSpoolIOOutsideTheJobLock(t *testing.T) {
	a := newStoreAgent(t)

	// lockFree waits until a thread of this process is blocked opening
	// a FIFO, then checks that the job lock can be taken and that the
	// call (done) has not returned.
	lockFree := func(what string, done <-chan struct{}) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !inOpenat(t) {
			select {
			case <-done:
				t.Fatalf("%s: returned although its spool file blocks", what)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: never opened its spool file", what)
			}
			time.Sleep(time.Millisecond)
		}
		if !a.jobs.LockFree() {
			t.Fatalf("%s: the job lock is held while a spool file blocks", what)
		}
		select {
		case <-done:
			t.Fatalf("%s: returned although its spool file blocks", what)
		default:
		}
	}
	// unblock opens a FIFO's other end, which lets a blocked open go on.
	unblock := func(path string, flag int) {
		t.Helper()
		f, err := os.OpenFile(path, flag, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}

	t.Run("home takes an update", func(t *testing.T) {
		out := filepath.Join(a.spools.Dir(fzHome), "stdout")
		os.Remove(out)
		if err := syscall.Mkfifo(out, 0o600); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		var acks map[string]relay.Ack
		go func() {
			defer close(done)
			acks, _ = a.news.TakeUpdates([]relay.Update{{ID: fzHome, Node: "n3", OutOff: 0, Out: []byte("x\n")}})
		}()
		// The spool's Append is in its open of the FIFO; the lock is free.
		lockFree("takeUpdates", done)
		// Open for reading while the writer waits, and keep reading what
		// it writes until it is done.
		r, err := os.OpenFile(out, os.O_RDONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		<-done
		if k, ok := acks[fzHome]; !ok || k.Done {
			t.Fatalf("ack %+v", acks)
		}
	})

	t.Run("node pushes news", func(t *testing.T) {
		dir := a.node.SpoolDir(fzLocal)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		status := filepath.Join(dir, "status")
		if err := syscall.Mkfifo(status, 0o600); err != nil {
			t.Fatal(err)
		}
		// Its home has none of its output (known, not asked as after a
		// restart): the push reads the job's files.
		a.jobs.Acked(map[string]relay.Ack{fzLocal: {Out: 0, Err: 0}})
		done := make(chan struct{})
		var batches []*jobtable.HomeBatch
		go func() {
			defer close(done)
			batches = a.news.PushBatches()
		}()
		lockFree("pushBatches", done)
		unblock(status, os.O_WRONLY)
		<-done
		n := 0
		for _, b := range batches {
			for _, u := range b.Ups {
				if u.ID == fzLocal {
					n++
				}
			}
		}
		if n != 1 {
			t.Fatalf("%d updates of %s in %+v", n, fzLocal, batches)
		}
	})
}

// inOpenat says a thread of this process is in the openat system call
// (/proc/self/task/TID/syscall starts with its number while it blocks).
func inOpenat(t *testing.T) bool {
	nr := map[string]string{"amd64": "257", "arm64": "56"}[runtime.GOARCH]
	if nr == "" {
		t.Skipf("no openat number for %s", runtime.GOARCH)
	}
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, e := range tasks {
		b, err := os.ReadFile(filepath.Join("/proc/self/task", e.Name(), "syscall"))
		if err == nil && strings.HasPrefix(string(b), nr+" ") {
			return true
		}
	}
	return false
}
