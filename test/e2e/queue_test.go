package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"roam/internal/api"
	"roam/internal/cgroup"
)

// touchC touches argv[1] MiB of memory, holds it for argv[2]
// milliseconds, and exits 0 if the memory still holds what it wrote.
const touchC = `#include <stdlib.h>
#include <string.h>
#include <time.h>
int main(int argc, char **argv) {
	size_t n = (size_t)atoi(argv[1]) << 20;
	long ms = atol(argv[2]);
	char *p = malloc(n);
	if (!p)
		return 2;
	memset(p, 1, n);
	struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
	nanosleep(&ts, 0);
	return p[n - 1] == 1 ? 0 : 3;
}
`

// buildTouch compiles touchC, static, in a directory every node shares.
func buildTouch(t *testing.T) string {
	t.Helper()
	dir := sharedDir(t, "touch-")
	src, prog := filepath.Join(dir, "touch.c"), filepath.Join(dir, "touch")
	if err := os.WriteFile(src, []byte(touchC), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("gcc", "-O2", "-static", "-o", prog, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v: %s", err, out)
	}
	return prog
}

// jobsMemory is what the jobs of node holds now, and the most it held,
// by their parent group (its memory controller's count: pages and page
// cache; the most only on cgroup v1, 0 on v2).
func (c *cluster) jobsMemory(l cgroup.Layout, node string) (now, most int64) {
	dir := filepath.Join(l.Memory, "roam", c.name, "n"+node, "jobs")
	cur, peak := "memory.usage_in_bytes", "memory.max_usage_in_bytes"
	if l.V2 {
		cur, peak = "memory.current", ""
	}
	now, _ = strconv.ParseInt(readTrim(filepath.Join(dir, cur)), 10, 64)
	if peak != "" {
		most, _ = strconv.ParseInt(readTrim(filepath.Join(dir, peak)), 10, 64)
	}
	return now, most
}

// The queue at the home, on real agents, one cluster of four nodes of
// 768 MiB for every check. 120 jobs of a user, each of --mem 160M
// touching 150 MiB for a second, run attached from node 1: roam ps shows
// some pending (no node has room) while others run, never more than 4 on
// a node (sampled), no node's jobs ever hold more than its 768 MiB (their
// group's count, sampled, and its high-water mark), the kernel's OOM
// killer acts in no group, all 120 end with status 0 and the run prints
// the summary. Then fairness: while the user has a sweep of 10,000 such
// jobs pending at node 1, another user's first job, run attached at node
// 2, starts (and ends) within 5 s; and roam kill SWEEP ends the 10,000's
// rest at once.
func TestQueue(t *testing.T) {
	layout, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	touch := buildTouch(t)
	c := upCluster(t, "e2eque1", 78, "--nodes", "4", "--cpu", "0.5", "--mem-mb", "768")
	c.waitAllAlive(4)
	nodes := []string{"1", "2", "3", "4"}

	run := c.roamAs(jobUser, "--node", "1", "run", "-n", "120", "--mem", "160M", "--", touch, "150", "1000")
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	began := time.Now()
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	var runErr error
	most, samples, pendingWhileRunning := 0, 0, 0
	held := map[string]int64{}
sample:
	for {
		select {
		case runErr = <-done:
			break sample
		case <-time.After(100 * time.Millisecond): // roam ps asks every node: the nodes have half a CPU
		}
		on := map[string]int{}
		pending := 0
		for _, j := range c.ps("1") {
			switch {
			case !strings.Contains(j.Cmd, touch):
			case j.State == api.StatePending && j.PendingWhy == "no node has room for --mem 160M now":
				pending++
			case j.State == api.StateRunning || j.State == api.StateStopped:
				on[j.Node]++
			}
		}
		for _, n := range nodes {
			if on[n] > 4 {
				t.Fatalf("node %s runs %d jobs of --mem 160M; it has room for 4 in 768 MiB", n, on[n])
			}
			most = max(most, on[n])
			now, _ := c.jobsMemory(layout, n)
			held[n] = max(held[n], now)
		}
		if pending > 0 && len(on) > 0 {
			pendingWhileRunning++
		}
		samples++
	}
	took := time.Since(began)
	if code := exitCodeOf(runErr); code != 0 {
		t.Fatalf("roam run exited %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "120 jobs: 120 ok, 0 failed, 0 lost") {
		t.Fatalf("no summary of 120 ok: %s", stderr.String())
	}
	if pendingWhileRunning == 0 || most == 0 {
		t.Fatalf("roam ps never showed jobs pending for room while others ran (%d samples, at most %d a node)", samples, most)
	}
	for _, n := range nodes {
		_, peak := c.jobsMemory(layout, n)
		group := fmt.Sprintf("roam/%s/n%s", c.name, n)
		if k := oomKills(layout, group+"/jobs") + oomKills(layout, group); k > 0 {
			t.Errorf("node %s: the OOM killer acted %d times", n, k)
		}
		if held[n] > 768<<20 || peak > 768<<20 {
			t.Errorf("node %s's jobs held %d MiB (sampled), %d MiB at most: more than its 768", n, held[n]>>20, peak>>20)
		}
		t.Logf("node %s: its jobs held at most %d MiB sampled, %d MiB by its group's mark", n, held[n]>>20, peak>>20)
	}
	t.Logf("120 jobs of --mem 160M in %.1f s, at most %d a node; pending beside running in %d of %d samples of roam ps", took.Seconds(), most, pendingWhileRunning, samples)

	// Fairness: the user's 10,000 wait, another user's first job starts.
	out, err := c.roamAs(jobUser, "--node", "1", "run", "-d", "-n", "10000", "--mem", "160M", "--", touch, "150", "2000").CombinedOutput()
	if err != nil {
		t.Fatalf("run -d -n 10000: %v: %s", err, out)
	}
	big := sweepOf(t, string(out))
	waitFor(t, 30*time.Second, "16 of the 10,000 run", func() (bool, string) {
		n := 0
		for _, j := range c.sweepJobs(big) {
			if j.State == api.StateRunning {
				n++
			}
		}
		return n >= 16, fmt.Sprint(n, " run")
	})
	uid, gid := ensureUser(t, "roamque2")
	b := c.as(uid, gid, "--node", "2", "run", "--mem", "160M", "--", "sh", "-c", "echo B ran")
	began = time.Now()
	bout, err := b.CombinedOutput()
	waited := time.Since(began)
	if err != nil || strings.TrimSpace(string(bout)) != "B ran" {
		t.Fatalf("B's run: %v: %s", err, bout)
	}
	pending := 0
	for _, j := range c.sweepJobs(big) {
		if j.State == api.StatePending {
			pending++
		}
	}
	t.Logf("B's first job ran and ended %.1f s after its roam run, while A had %d jobs pending", waited.Seconds(), pending)
	if waited > 5*time.Second || pending < 9900 {
		t.Fatalf("B's first job took %.1f s (A had %d pending)", waited.Seconds(), pending)
	}
	began = time.Now()
	c.mustRunAs(jobUser, "--node", "3", "kill", big)
	waitFor(t, 30*time.Second, "the killed sweep ends", func() (bool, string) {
		js := c.sweepJobs(big)
		for _, j := range js {
			if j.State != api.StateFinished && j.State != api.StateLost {
				return false, j.ID + " " + j.State
			}
		}
		return len(js) == 10000, fmt.Sprint(len(js), " jobs")
	})
	t.Logf("roam kill of the sweep of 10,000: all ended %.1f s after it", time.Since(began).Seconds())
}

// The first Done-when line of issue 43, on real agents: a user's
// `roam run -n 10000 --mem 64M` on four nodes of 1 GiB, attached: no node
// ever holds more than its memory admits (sampled: at most 16 jobs a
// node, their group's count and mark within the node's memory), the OOM
// killer acts in no group, all 10,000 end with status 0, and the run
// prints the summary and exits 0. It takes minutes (the attached run
// follows each job's end, at the user's request rate): make test-long.
func TestQueueTenThousand(t *testing.T) {
	long(t)
	layout, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	touch := buildTouch(t)
	c := upCluster(t, "e2eque2", 79, "--nodes", "4", "--cpu", "0.5", "--mem-mb", "1024")
	c.waitAllAlive(4)
	nodes := []string{"1", "2", "3", "4"}
	run := c.roamAs(jobUser, "--node", "1", "run", "-n", "10000", "--mem", "64M", "--", touch, "48", "100")
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	began := time.Now()
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	var runErr error
	held := map[string]int64{}
	most, samples := 0, 0
sample:
	for {
		select {
		case runErr = <-done:
			break sample
		case <-time.After(time.Second):
		}
		on := map[string]int{}
		for _, j := range c.ps("1", "--state", "running") {
			on[j.Node]++
		}
		for _, n := range nodes {
			if on[n] > 16 {
				t.Fatalf("node %s runs %d jobs of --mem 64M; it has room for 16 in 1024 MiB", n, on[n])
			}
			most = max(most, on[n])
			now, _ := c.jobsMemory(layout, n)
			held[n] = max(held[n], now)
		}
		samples++
	}
	took := time.Since(began)
	if code := exitCodeOf(runErr); code != 0 {
		t.Fatalf("roam run exited %d: %s", code, tail(stderr.String(), 2000))
	}
	if !strings.Contains(stderr.String(), "10000 jobs: 10000 ok, 0 failed, 0 lost") {
		t.Fatalf("no summary of 10000 ok: %s", tail(stderr.String(), 2000))
	}
	for _, n := range nodes {
		_, peak := c.jobsMemory(layout, n)
		group := fmt.Sprintf("roam/%s/n%s", c.name, n)
		if k := oomKills(layout, group+"/jobs") + oomKills(layout, group); k > 0 {
			t.Errorf("node %s: the OOM killer acted %d times", n, k)
		}
		if held[n] > 1024<<20 || peak > 1024<<20 {
			t.Errorf("node %s's jobs held %d MiB (sampled), %d MiB at most: more than its 1024", n, held[n]>>20, peak>>20)
		}
	}
	mib := map[string]int64{}
	for n, b := range held {
		mib[n] = b >> 20
	}
	t.Logf("10,000 jobs of --mem 64M in %.0f s (%.0f a second), at most %d a node in %d samples; jobs' memory at most %v MiB by node (sampled)",
		took.Seconds(), 10000/took.Seconds(), most, samples, mib)
}

// tail is the last n bytes of s.
func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
