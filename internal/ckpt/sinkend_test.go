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

	"roam/internal/procfs"
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
	if parent != 0 {
		pids = procfs.Children(parent)
	} else {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			if pid, err := strconv.Atoi(e.Name()); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	var out []int
	for _, pid := range pids {
		b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
		args := strings.Split(string(b), "\x00")
		if err == nil && len(args) > 1 && args[1] == "page-server" && strings.Contains(string(b), "\x00"+dir+"\x00") && procfs.Running(pid) {
			out = append(out, pid)
		}
	}
	return out
}
