package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"roam/internal/cgroup"
)

// forkBombC forks without end; a fork refused (at its cgroup's pids.max)
// is tried again 10 ms later, by every process, as a bomb would.
const forkBombC = `#include <time.h>
#include <unistd.h>
int main(void) {
	for (;;)
		if (fork() < 0) {
			struct timespec ts = {0, 10000000};
			nanosleep(&ts, 0);
		}
}
`

// A job past its --mem or --cpus is held by its own cgroup, and its node's
// other jobs keep their speed: a neighbour of another user (root), a
// burner of --cpus 0.25, is measured alone, then beside a job of 4
// threads limited to --cpus 0.5 and a job of --mem 64M that touches
// 200 MiB, then beside a fork bomb. The memory hog is killed by its own
// group's OOM killer (roam ps: 137, "out of memory (--mem 64M)"), the
// node's group and the neighbour's meet none; the --cpus 0.5 job gets
// at most about half a CPU (its group's CPU time over wall time), on its
// node and on the node it migrates to, where its groups have the
// request's limits; the fork bomb stops at pids.max and roam ps answers
// at once while it runs. The neighbour's CPU rate stays within a
// tolerance of its rate alone (a ratio: the machine is shared).
func TestRequestsEnforced(t *testing.T) {
	layout, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	burn, prog, bomb := workload(t, "burn"), migjob(t), buildForkBomb(t)
	c := upCluster(t, "e2eres", 70, "--nodes", "2", "--cpu", "1,0.8", "--mem-mb", "1024", "--job-pids", "128", "--scheduler", "static")
	c.waitAllAlive(2)
	group := func(node, id string) *cgroup.Jobs {
		return &cgroup.Jobs{Layout: layout, Parent: fmt.Sprintf("roam/%s/n%s", c.name, node)}
	}
	// rate is job id's CPU seconds per second on node, by its group, in
	// four windows of d: the most of them, and over all four. The
	// machine is shared, and every emulated node's CPU comes from the one
	// group all clusters' nodes are under: a window in which others' work
	// took the machine says nothing of the jobs here, and the best of four
	// is what the node gave when it got its capacity. A limit is judged
	// over all four: a short window may hold one more CFS period's quota.
	rate := func(node, id string, d time.Duration) (best, all float64) {
		t.Helper()
		g := group(node, id)
		first, _, ok := g.Usage(id)
		start := time.Now()
		prev := first
		for range 4 {
			t0 := time.Now()
			time.Sleep(d)
			cpu, _, ok2 := g.Usage(id)
			if !ok || !ok2 {
				t.Fatalf("no CPU count in %s", g.Rel(id))
			}
			best = max(best, (cpu-prev)/time.Since(t0).Seconds())
			prev = cpu
		}
		return best, (prev - first) / time.Since(start).Seconds()
	}
	neighbour := c.startAs(root, "1", "--cpus", "0.25", burn, "100000", "0")
	waitRunning(c, neighbour)
	alone, _ := rate("1", neighbour, 750*time.Millisecond)
	if alone < 0.15 || alone > 0.3 {
		t.Fatalf("a job of --cpus 0.25 alone used %.2f CPU", alone)
	}

	// A job of 4 threads held to half a CPU, and one past its memory.
	threads := c.start("1", "--cpus", "0.5", "--mem", "128M", prog, "threads", "1000000", marker(t))
	hog := c.start("1", "--mem", "64M", prog, "mem", "1000000", marker(t), "200")
	waitRunning(c, threads)
	busy, _ := rate("1", neighbour, 750*time.Millisecond)
	_, held := rate("1", threads, 750*time.Millisecond)
	j := c.waitFinished(hog, 30*time.Second)
	if j.ExitCode == nil || *j.ExitCode != 137 || j.EndReason != "out of memory (--mem 64M)" {
		t.Errorf("the job past its --mem ended with %v, %q", j.ExitCode, j.EndReason)
	}
	for _, rel := range []string{fmt.Sprintf("roam/%s/n1", c.name), group("1", neighbour).Rel(neighbour)} {
		if n := oomKills(layout, rel); n != 0 {
			t.Errorf("the OOM killer killed %d processes in %s", n, rel)
		}
	}
	t.Logf("neighbour: %.3f CPU alone, %.3f beside the hogs (ratio %.2f); the --cpus 0.5 job of 4 threads: %.3f", alone, busy, busy/alone, held)
	if busy < 0.7*alone {
		t.Errorf("the neighbour slowed from %.3f to %.3f CPU beside jobs past their --cpus and --mem", alone, busy)
	}
	if held > 0.55 || held < 0.1 {
		t.Errorf("a job of --cpus 0.5 used %.3f CPU", held)
	}

	// Moved, it keeps its limits: its groups on node 2 hold them, its
	// processes are in them, and it still gets half a CPU at most.
	c.mustRun("--node", "1", "migrate", threads, "2")
	rel := group("2", threads).Rel(threads)
	want := map[string]string{
		filepath.Join(layout.Memory, rel, limitFile(layout, "memory")): strconv.Itoa(128 << 20),
		filepath.Join(layout.CPU, rel, limitFile(layout, "cpu")):       halfCPU(layout),
	}
	if layout.Pids != "" {
		want[filepath.Join(layout.Pids, rel, "pids.max")] = "128"
	}
	for f, v := range want {
		if got := readTrim(f); got != v {
			t.Errorf("after the migration %s = %q, want %q", f, got, v)
		}
	}
	waitFor(t, 10*time.Second, threads+"'s processes in its CPU group on node 2", func() (bool, string) {
		ps, _ := copies(threads)
		if len(ps) != 1 {
			return false, fmt.Sprint("copies ", ps)
		}
		g := procGroups(ps[0])
		cpu := g["cpu"]
		if layout.V2 {
			cpu = g["unified"]
		}
		return cpu == "/"+rel && (layout.Pids == "" || layout.V2 || g["pids"] == "/"+rel), fmt.Sprint(g)
	})
	if _, moved := rate("2", threads, 500*time.Millisecond); moved > 0.55 || moved < 0.1 {
		t.Errorf("on node 2 the job of --cpus 0.5 used %.3f CPU", moved)
	}
	c.mustRun("--node", "1", "kill", threads)

	// A fork bomb stops at its pids.max; roam ps answers, the neighbour
	// keeps its speed.
	b := c.start("1", "--cpus", "0.25", bomb)
	brel := group("1", b).Rel(b)
	if layout.Pids != "" {
		waitFor(t, 20*time.Second, "the fork bomb at its pids.max", func() (bool, string) {
			n := readTrim(filepath.Join(layout.Pids, brel, "pids.current"))
			return n == "128", n
		})
	}
	t0 := time.Now()
	c.ps("1")
	answered := time.Since(t0)
	bombed, _ := rate("1", neighbour, 750*time.Millisecond)
	t.Logf("beside the fork bomb: roam ps answered in %v; the neighbour used %.3f CPU (ratio %.2f)", answered, bombed, bombed/alone)
	if answered > 3*time.Second {
		t.Errorf("roam ps took %v beside a fork bomb", answered)
	}
	if bombed < 0.7*alone {
		t.Errorf("the neighbour slowed from %.3f to %.3f CPU beside a fork bomb", alone, bombed)
	}
	if j, ok := c.lookup(neighbour); !ok || j.State != "running" {
		t.Errorf("the neighbour is %+v", j)
	}
	c.mustRun("--node", "1", "kill", b, neighbour)
	for _, id := range []string{b, neighbour, threads} {
		c.waitFinished(id, 30*time.Second)
	}
}

// buildForkBomb compiles forkBombC, static: each of its thousands of
// copies maps nothing but itself.
func buildForkBomb(t *testing.T) string {
	t.Helper()
	dir := sharedDir(t, "bomb-")
	src, prog := filepath.Join(dir, "bomb.c"), filepath.Join(dir, "bomb")
	if err := os.WriteFile(src, []byte(forkBombC), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-O2", "-static", "-o", prog, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v: %s", err, out)
	}
	return prog
}

// waitRunning waits until job id runs.
func waitRunning(c *cluster, id string) {
	c.t.Helper()
	waitFor(c.t, 20*time.Second, id+" running", func() (bool, string) {
		j, ok := c.lookup(id)
		return ok && j.State == "running", j.State
	})
}

// oomKills is the OOM killer's count of group rel (its memory
// controller's), 0 when it has none.
func oomKills(l cgroup.Layout, rel string) int {
	name := "memory.oom_control"
	if l.V2 {
		name = "memory.events"
	}
	b, _ := os.ReadFile(filepath.Join(l.Memory, rel, name))
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	return 0
}

// limitFile is the file of a group's memory or CPU limit in layout l.
func limitFile(l cgroup.Layout, what string) string {
	switch {
	case what == "memory" && l.V2:
		return "memory.max"
	case what == "memory":
		return "memory.limit_in_bytes"
	case l.V2:
		return "cpu.max"
	}
	return "cpu.cfs_quota_us"
}

// halfCPU is a CPU limit of half a CPU as layout l writes it.
func halfCPU(l cgroup.Layout) string {
	if l.V2 {
		return "50000 100000"
	}
	return "50000"
}

func readTrim(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}
