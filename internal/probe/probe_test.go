package probe

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"roam/internal/cgroup"
	"roam/internal/procfs"
)

// Runnable counts the threads of the node's group that are runnable and
// leaves out the processes it is told to skip (the jobs' roam-init): two
// busy loops and a sleeping process in a real CPU group count 2, 1 with
// one loop skipped, and 2 again when the skipped pid's start time is not
// the loop's (a pid reused by another process).
func TestRunnableLeavesOutSkipped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("makes a cgroup: needs root")
	}
	l, err := cgroup.Detect()
	if err != nil {
		t.Skipf("no cgroup controllers: %v", err)
	}
	rel := fmt.Sprintf("roam-probe-test-%d", os.Getpid())
	if err := l.Create(rel); err != nil {
		t.Fatal(err)
	}
	var procs []*exec.Cmd
	t.Cleanup(func() {
		for _, c := range procs {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
		if err := l.Remove(rel); err != nil {
			t.Error(err)
		}
	})
	start := func(argv ...string) int {
		c := exec.Command(argv[0], argv[1:]...)
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, c)
		if err := l.AddCPUProc(rel, c.Process.Pid); err != nil {
			t.Fatal(err)
		}
		return c.Process.Pid
	}
	// The loops end with the test's process, also when a timeout kills it
	// before its cleanup runs.
	loop := "while kill -0 $PPID 2>/dev/null; do :; done"
	busy := start("sh", "-c", loop)
	busy2 := start("sh", "-c", loop)
	start("sleep", "1000")
	started := func(pid int) uint64 {
		st, err := procfs.ReadStat(pid)
		if err != nil {
			t.Fatal(err)
		}
		return st.StartTime
	}
	n := Node{Layout: l, Group: rel}

	waitFor := func(what string, want int, skip map[int]uint64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		got := n.Runnable(skip)
		for got != want && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
			got = n.Runnable(skip)
		}
		if got != want {
			t.Fatalf("%s: %d runnable threads, want %d", what, got, want)
		}
	}
	waitFor("two busy loops and a sleeper", 2, nil)
	waitFor("one busy loop skipped", 1, map[int]uint64{busy: started(busy)})
	waitFor("both busy loops skipped", 0, map[int]uint64{busy: started(busy), busy2: started(busy2)})
	waitFor("a skipped pid of another start time", 2, map[int]uint64{busy: started(busy) + 1})
}
