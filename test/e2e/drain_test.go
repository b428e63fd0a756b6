package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"
)

// roam node drain on real agents: 8 jobs of the job user on node 2, one of
// them pinned; drain --wait returns once node 2 runs only the pinned one,
// which it lists; roam nodes says node 2 drains; new jobs go elsewhere and balancing
// sends none there; after roam node resume, balancing uses it again.
// roam node remove then empties node 3 and its agent leaves.
func TestDrainANode(t *testing.T) {
	prog := migjob(t)
	c := upCluster(t, "e2edrain", 40, "--nodes", "3", "--cpu", "0.5,0.5,0.5", "--scheduler", "static")
	c.waitAllAlive(3)
	ids := runIDs(c.mustRunAs(jobUser, "--node", "1", "run", "-d", "-n", "7", "--on", "2", "--", prog, "cpu", "600", marker(t)))
	pinned := strings.TrimSpace(c.mustRunAs(jobUser, "--node", "1", "run", "-d", "--pin", "--on", "2", "--", prog, "cpu", "600", marker(t)))
	ids = append(ids, pinned)
	t.Cleanup(func() { c.run(append([]string{"--node", "1", "kill", "-s", "KILL"}, ids...)...) })
	if len(ids) != 8 {
		t.Fatalf("jobs %v", ids)
	}
	for _, id := range ids {
		waitFor(t, 30*time.Second, id+" running on node 2", func() (bool, string) {
			j := c.job(id)
			return j.State == "running" && j.Node == "2", j.State + " on " + j.Node
		})
	}
	if out, err := c.run("--node", "1", "node", "drain", "9"); err == nil || !strings.Contains(out, `no node "9"`) {
		t.Fatalf("drain node 9: %v: %s", err, out)
	}
	out := c.mustRun("--node", "1", "node", "drain", "2", "--wait", "--timeout", "3m")
	if !strings.Contains(out, "drained but for 1 pinned jobs") || !strings.Contains(out, pinned+" ") || !strings.Contains(out, "roam run --pin") {
		t.Fatalf("drain --wait said:\n%s", out)
	}
	for _, id := range ids {
		j := c.job(id)
		if j.State != "running" || (id == pinned) != (j.Node == "2") {
			t.Fatalf("after the drain: %s %s on node %s", id, j.State, j.Node)
		}
	}
	if nodes := c.mustRun("--node", "3", "nodes"); !regexpLine(nodes, `^2\s+\S+\s+draining\s`) {
		t.Fatalf("roam nodes on node 3:\n%s", nodes)
	}
	// Balancing on, new jobs: none goes to node 2.
	c.mustRun("--node", "1", "policy", "load", "balance")
	more := runIDs(c.mustRunAs(jobUser, "--node", "1", "run", "-d", "-n", "3", "--", prog, "cpu", "600", marker(t)))
	ids = append(ids, more...)
	// For a few of the policy's rounds (1 s each), none goes there.
	for end := time.Now().Add(4 * time.Second); time.Now().Before(end); time.Sleep(300 * time.Millisecond) {
		for _, j := range c.ps("1", "-a") {
			if j.Node == "2" && j.ID != pinned {
				t.Fatalf("job %s went to the draining node", j.ID)
			}
		}
	}
	if out, err := c.roamAs(jobUser, "--node", "1", "run", "-d", "--on", "2", "--", prog, "cpu", "1", marker(t)).CombinedOutput(); err == nil || !strings.Contains(string(out), "draining") {
		t.Fatalf("run --on 2: %v: %s", err, out)
	}
	c.mustRun("--node", "1", "node", "resume", "2")
	waitFor(t, time.Minute, "balancing to use node 2 again", func() (bool, string) {
		n := 0
		for _, j := range c.ps("1", "-a") {
			if j.Node == "2" && j.State == "running" {
				n++
			}
		}
		return n > 1, ""
	})
	if nodes := c.mustRun("--node", "3", "nodes"); !regexpLine(nodes, `^2\s+\S+\s+alive\s`) {
		t.Fatalf("roam nodes on node 3 after resume:\n%s", nodes)
	}
	// Remove node 3: its jobs leave, then it does.
	out = c.mustRun("--node", "1", "node", "remove", "3", "--timeout", "3m")
	if !strings.Contains(out, "node 3: left the cluster") {
		t.Fatalf("remove said:\n%s", out)
	}
	// Every job runs on, on node 1 or 2.
	for _, j := range c.ps("1", "-a") {
		if j.State != "running" || (j.Node != "1" && j.Node != "2") {
			t.Fatalf("after the removal: job %s %s on node %s", j.ID, j.State, j.Node)
		}
	}
	if nodes := c.mustRun("--node", "1", "nodes"); !regexpLine(nodes, `^3\s+\S+\s+dead\s`) {
		t.Fatalf("roam nodes after the removal:\n%s", nodes)
	}
}

// regexpLine says whether a line of s matches re.
func regexpLine(s, re string) bool { return regexp.MustCompile("(?m)" + re).MatchString(s) }

// runIDs are the job ids `roam run -d` printed, one a line, without the
// line a sweep's run says itself with on standard error ("roam: sweep
// ..."), which mustRunAs's combined output holds too.
func runIDs(out string) []string {
	var ids []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "roam: ") {
			ids = append(ids, l)
		}
	}
	return ids
}
