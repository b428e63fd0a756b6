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
	sinks := pageServersIn(dir)
	if len(sinks) != 1 {
		t.Fatalf("%d page-servers writing into %s, want the child's one", len(sinks), dir)
	}
	_ = child.Process.Kill()
	_ = child.Wait()
	for end := time.Now().Add(10 * time.Second); len(pageServersIn(dir)) > 0; time.Sleep(20 * time.Millisecond) {
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

// pageServersIn are the pids of `criu page-server` processes writing
// into dir.
func pageServersIn(dir string) []int {
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
			if st, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && !strings.Contains(string(st), ") Z ") {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}
