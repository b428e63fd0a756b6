package procfs

import (
	"errors"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"syscall"
	"testing"
	"time"
)

func TestParseStatNameWithParens(t *testing.T) {
	line := "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 2 1 20 0 1 0 12345 1000 50\n"
	st, err := parseStat([]byte(line))
	want := Stat{State: 'S', Flags: 4194560, UTime: 7, STime: 3, CUTime: 2, CSTime: 1, StartTime: 12345}
	if err != nil || st != want {
		t.Fatalf("parseStat = %+v, %v; want %+v", st, err, want)
	}
	for _, bad := range []string{"", "42 no-paren S", "42 (x) S 1 2"} {
		if _, err := parseStat([]byte(bad)); !errors.Is(err, ErrFormat) {
			t.Errorf("parseStat(%q) = %v", bad, err)
		}
	}
}

func TestRunningSelfZombieAndReaped(t *testing.T) {
	if !Running(os.Getpid()) {
		t.Fatal("self not running")
	}
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	deadline := time.Now().Add(5 * time.Second)
	for Running(pid) {
		if time.Now().After(deadline) {
			t.Fatal("exited child still counts as running")
		}
		time.Sleep(time.Millisecond)
	}
	if st, err := ReadStat(pid); err != nil || st.State != 'Z' {
		t.Fatalf("unreaped child: %+v, %v; want a zombie", st, err)
	}
	_ = cmd.Wait()
	if _, err := ReadStat(pid); err == nil {
		t.Fatal("reaped child still has a stat")
	}
}

// HeldBy is true only while every thread of the process is in a tracing
// stop of the given tracer (the thread that attached).
func TestHeldBy(t *testing.T) {
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	me := syscall.Gettid()
	if HeldBy(pid, me) {
		t.Fatal("a running process said held")
	}
	if err := syscall.PtraceAttach(pid); err != nil {
		t.Skip("ptrace:", err)
	}
	var ws syscall.WaitStatus
	if _, err := syscall.Wait4(pid, &ws, 0, nil); err != nil || !ws.Stopped() {
		t.Fatalf("wait: %v %v", ws, err)
	}
	if !HeldBy(pid, me) {
		st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
		t.Fatalf("a process stopped by tracer %d not held:\n%s", me, st)
	}
	if HeldBy(pid, me+1) || HeldBy(-1, me) {
		t.Fatal("held by another tracer, or a missing process held")
	}
	if err := syscall.PtraceDetach(pid); err != nil {
		t.Fatal(err)
	}
}
