package ckpt

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// A `criu page-server` the agent started ends with the agent: an agent
// SIGKILLed in the middle of a migration into its node, and started
// again, knows nothing of the one it left, which would wait for pages
// for good. The test's child process stands for the agent.
func TestSinkEndsWithTheAgent(t *testing.T) {
	if dir := os.Getenv("ROAM_TEST_SINK_DIR"); dir != "" {
		h := &Host{CRIU: CRIU{Path: DefaultPath(), ExecMu: &sync.Mutex{}}}
		if _, err := h.Sink(dir); err != nil {
			t.Fatal(err)
		}
		os.Stdout.WriteString("up\n")
		time.Sleep(time.Minute)
		return
	}
	if _, err := os.Stat(DefaultPath()); err != nil {
		t.Fatalf("no CRIU at %s: make deps installs it", DefaultPath())
	}
	dir, err := os.MkdirTemp("", "roam-sink-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	child := exec.Command(os.Args[0], "-test.run=^TestSinkEndsWithTheAgent$")
	child.Env = append(os.Environ(), "ROAM_TEST_SINK_DIR="+dir)
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	if line, _ := bufio.NewReader(out).ReadString('\n'); line != "up\n" {
		t.Fatalf("the child said %q, not up", line)
	}
	// Only the child's own: CRIU forks short-lived copies of itself
	// while it starts (kernel feature probes), same command line. And
	// the child's Start returns before the kernel has set the new
	// program's command line, so wait for it to show.
	sinks := pageServersIn(dir, child.Process.Pid)
	for end := time.Now().Add(10 * time.Second); len(sinks) != 1 && time.Now().Before(end); sinks = pageServersIn(dir, child.Process.Pid) {
		time.Sleep(10 * time.Millisecond)
	}
	if len(sinks) != 1 {
		t.Fatalf("%d page-servers the child started writing into %s, want one", len(sinks), dir)
	}
	_ = child.Process.Kill()
	_ = child.Wait()
	for end := time.Now().Add(10 * time.Second); len(pageServersIn(dir, 0)) > 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			for _, p := range sinks {
				if pr, err := os.FindProcess(p); err == nil {
					_ = pr.Kill()
				}
			}
			t.Fatalf("criu page-server %v still runs 10 s after its agent was killed", sinks)
		}
	}
}

// pageServersIn are the pids of live `criu page-server` processes
// writing into dir whose parent is parent (any parent if 0).
func pageServersIn(dir string, parent int) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		args := strings.Split(string(b), "\x00")
		if err == nil && len(args) > 1 && args[1] == "page-server" && strings.Contains(string(b), "\x00"+dir+"\x00") {
			if state, ppid, ok := procState(e.Name()); ok && state != "Z" && (parent == 0 || ppid == parent) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// procState is a process's state letter and parent pid from its stat.
func procState(pid string) (string, int, bool) {
	st, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return "", 0, false
	}
	i := strings.LastIndexByte(string(st), ')')
	f := strings.Fields(string(st[i+1:]))
	if i < 0 || len(f) < 2 {
		return "", 0, false
	}
	ppid, err := strconv.Atoi(f[1])
	return f[0], ppid, err == nil
}
