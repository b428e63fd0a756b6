package ckpt

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"roam/internal/cgroup"
	"roam/internal/procfs"
)

// lift takes a job whose node's group a quota limits into the leaf
// beside it, and puts back what CRIU's worker does not hold: past
// liftLimit, or at once when the dump ends. A group no quota limits is
// left alone. (A cgroup tree of plain files: each move is a write of the
// pid to the group's cgroup.procs.)
func TestLift(t *testing.T) {
	root := t.TempDir()
	for rel, q := range map[string]string{"roam/c/n1": "20000", "roam/c/n2": "-1"} {
		os.MkdirAll(filepath.Join(root, rel), 0o755)
		os.WriteFile(filepath.Join(root, rel, "cpu.cfs_quota_us"), []byte(q), 0o644)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	pid := cmd.Process.Pid
	in := func(rel string) bool {
		b, _ := os.ReadFile(filepath.Join(root, rel, "cgroup.procs"))
		return strings.TrimSpace(string(b)) == strconv.Itoa(pid)
	}
	host := func(parent string) *Host {
		l := cgroup.Layout{CPU: root, Memory: root}
		return &Host{Layout: l, Jobs: &cgroup.Jobs{Layout: l, Parent: parent}}
	}
	// No worker holds the job (pid 1 traces nothing): back after liftLimit.
	var wg sync.WaitGroup
	t0 := time.Now()
	host("roam/c/n1").lift(pid, 1, make(chan struct{}), &wg)
	if !in("roam/c/n1.dump") || in("roam/c/n1") {
		t.Fatal("the job was not lifted into roam/c/n1.dump")
	}
	wg.Wait()
	if d := time.Since(t0); !in("roam/c/n1") || d < liftLimit || d > liftLimit+2*time.Second {
		t.Fatalf("after %v the job is back in roam/c/n1: %v (limit %v)", d, in("roam/c/n1"), liftLimit)
	}
	// The dump ended: back at once.
	os.Remove(filepath.Join(root, "roam/c/n1/cgroup.procs"))
	done := make(chan struct{})
	t0 = time.Now()
	host("roam/c/n1").lift(pid, 1, done, &wg)
	close(done)
	wg.Wait()
	if d := time.Since(t0); !in("roam/c/n1") || d >= liftLimit {
		t.Fatalf("a dump that ended left the job lifted for %v (back: %v)", d, in("roam/c/n1"))
	}
	// A job the worker holds (this test's thread, by ptrace) stays lifted:
	// the watcher ends at once, past the limit nothing moves back.
	os.Remove(filepath.Join(root, "roam/c/n1/cgroup.procs"))
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := syscall.PtraceAttach(pid); err != nil {
		t.Fatal("ptrace:", err)
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil || !ws.Stopped() {
		t.Fatalf("wait: %v %v", ws, err)
	}
	t0 = time.Now()
	host("roam/c/n1").lift(pid, syscall.Gettid(), make(chan struct{}), &wg)
	wg.Wait()
	if d := time.Since(t0); d >= liftLimit || !in("roam/c/n1.dump") || in("roam/c/n1") {
		t.Fatalf("a held job: watched for %v, still lifted %v", d, in("roam/c/n1.dump"))
	}
	syscall.PtraceDetach(pid)
	// No quota: nothing moves.
	host("roam/c/n2").lift(pid, 1, done, &wg)
	wg.Wait()
	if _, err := os.Stat(filepath.Join(root, "roam/c/n2.dump")); err == nil || in("roam/c/n2") {
		t.Fatal("a job of an unthrottled group was moved")
	}
}

// A checkpoint's CRIU worker runs as the job does: at roam-init's nice,
// not the agent's -10, and under v1 in the job's CPU group (its own with
// a quota, else the node's jobs' one); under v2 it stays in its group.
func TestCheckpointWorkerRunsAsTheJob(t *testing.T) {
	root := t.TempDir()
	start := func(nice int) int {
		cmd := exec.Command("sleep", "30")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		if err := syscall.Setpriority(syscall.PRIO_PROCESS, cmd.Process.Pid, nice); err != nil {
			t.Fatal(err)
		}
		return cmd.Process.Pid
	}
	init := start(5)
	for _, c := range []struct {
		name, id, want string
		v2             bool
	}{
		{"a job with a quota", "n1.1", "roam/c/n1/jobs/n1.1", false},
		{"a job without one", "n1.2", "roam/c/n1", false},
		{"cgroup v2", "n1.1", "", true},
	} {
		worker := start(-10)
		os.RemoveAll(filepath.Join(root, "roam"))
		os.MkdirAll(filepath.Join(root, "roam/c/n1/jobs/n1.1"), 0o755)
		l := cgroup.Layout{CPU: root, Memory: root, V2: c.v2}
		(&Host{Layout: l, Jobs: &cgroup.Jobs{Layout: l, Parent: "roam/c/n1"}}).asJob(c.id, init, worker)
		st, err := procfs.ReadStat(worker)
		if err != nil || st.Nice != 5 {
			t.Errorf("%s: the worker's nice is %d (%v), want roam-init's 5", c.name, st.Nice, err)
		}
		for _, g := range []string{"roam/c/n1", "roam/c/n1/jobs/n1.1"} {
			b, _ := os.ReadFile(filepath.Join(root, g, "cgroup.procs"))
			if in := strings.TrimSpace(string(b)) == strconv.Itoa(worker); in != (g == c.want) {
				t.Errorf("%s: worker in %s: %v, want it in %q", c.name, g, in, c.want)
			}
		}
	}
}
