package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"roam/internal/emu"
	"roam/internal/procfs"
)

// Eight nodes know each other within 5 s of up; a killed agent is marked not
// alive within 10 s; down leaves nothing.
func TestEightNodesMembershipFailureAndDown(t *testing.T) {
	c := upCluster(t, "e2emem", 10, "--nodes", "8")
	upDone := time.Now()
	ids := []string{"1", "2", "3", "4", "5", "6", "7", "8"}
	waitFor(t, 5*time.Second, "every node lists all 8 alive", func() (bool, string) {
		for _, id := range ids {
			if a := alive(c.nodes(id)); len(a) != 8 {
				return false, fmt.Sprintf("node %s sees %d alive: %v", id, len(a), a)
			}
		}
		return true, ""
	})
	t.Logf("all 8 alive everywhere %v after up", time.Since(upDone).Round(time.Millisecond))

	st := c.status()
	victim := st.Nodes[7]
	if victim.State != "up" || victim.PID <= 0 {
		t.Fatalf("node 8 status %+v", victim)
	}
	if err := syscall.Kill(victim.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	waitFor(t, 10*time.Second, "the other 7 mark node 8 not alive", func() (bool, string) {
		for _, id := range ids[:7] {
			n := find(c.nodes(id), "8")
			if n == nil || n.Alive {
				return false, fmt.Sprintf("node %s still sees node 8 alive", id)
			}
		}
		return true, ""
	})
	t.Logf("node 8 marked dead %v after kill -9", time.Since(killed).Round(time.Millisecond))
	if s := c.status().Nodes[7].State; s != "down" {
		t.Fatalf("cluster status shows the killed agent as %q", s)
	}

	agents := []int{}
	for _, n := range st.Nodes {
		agents = append(agents, n.PID)
	}
	c.mustRun("cluster", "down")
	if left := emu.Leftovers("e2emem"); len(left) > 0 {
		t.Fatalf("down left %v", left)
	}
	for _, p := range agents {
		if procfs.Running(p) {
			t.Fatalf("agent pid %d still runs after down", p)
		}
	}
	// up on a name whose earlier up is gone works again, and a second up on
	// a running cluster is refused and changes nothing.
	c.mustRun("cluster", "up", "--subnet", "198.18.10.0/24", "--nodes", "2")
	before := c.status()
	if out, err := c.run("cluster", "up", "--subnet", "198.18.10.0/24", "--nodes", "3"); err == nil {
		t.Fatalf("second up accepted: %s", out)
	}
	after := c.status()
	if len(after.Nodes) != 2 || after.Nodes[0].PID != before.Nodes[0].PID {
		t.Fatalf("refused up changed the cluster: %+v -> %+v", before, after)
	}
}

// With capacities 1 and 0.25, one CPU-bound process on each node shows node
// 2's load as about four times node 1's: load is per unit of capacity.
func TestLoadIsPerCapacity(t *testing.T) {
	c := upCluster(t, "e2eload", 11, "--nodes", "2", "--cpu", "1,0.25")
	var loops []*exec.Cmd
	t.Cleanup(func() {
		for _, l := range loops {
			_ = l.Process.Kill()
			_ = l.Wait()
		}
	})
	for _, node := range []string{"1", "2"} {
		cmd, err := emu.Exec("e2eload", node, []string{"sh", "-c", "while :; do :; done"}, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		loops = append(loops, cmd)
	}
	var ratio float64
	waitFor(t, 20*time.Second, "node 2's load is about 4x node 1's, seen from node 1", func() (bool, string) {
		ns := c.nodes("1")
		n1, n2 := find(ns, "1"), find(ns, "2")
		if n1 == nil || n2 == nil || n1.Load == nil || n2.Load == nil || *n1.Load < 0.5 {
			return false, fmt.Sprintf("loads not known yet: %+v", ns)
		}
		ratio = *n2.Load / *n1.Load
		return ratio > 3.4 && ratio < 4.6 && *n1.Load > 0.8 && *n1.Load < 1.2,
			fmt.Sprintf("load 1 = %.2f, load 2 = %.2f, ratio %.2f", *n1.Load, *n2.Load, ratio)
	})
	t.Logf("load ratio node2/node1 = %.2f", ratio)
}

// An agent started with another secret is not listed by any member, and its
// messages are counted as rejected.
func TestOutsiderIsRefused(t *testing.T) {
	c := upCluster(t, "e2esec", 12, "--nodes", "3")
	members := []string{"1", "2", "3"}
	waitFor(t, 5*time.Second, "3 members", func() (bool, string) {
		a := alive(c.nodes("1"))
		return len(a) == 3, fmt.Sprint(a)
	})
	other := filepath.Join(t.TempDir(), "other-secret")
	c.mustRun("keygen", "--out", other)
	c.mustRun("cluster", "add", "--secret-file", other)

	rejected := func() int64 {
		var sum int64
		for _, id := range members {
			sum += c.stats(id).GossipRejected
		}
		return sum
	}
	// The outsider retries its join every 2 s; wait for two rounds of
	// refusals, then check that nobody lists it, then and for a while after.
	waitFor(t, 10*time.Second, "members count the outsider's messages as rejected", func() (bool, string) {
		r := rejected()
		return r >= 2, fmt.Sprintf("%d rejected", r)
	})
	for round := 0; round < 3; round++ {
		for _, id := range members {
			if n := find(c.nodes(id), "4"); n != nil {
				t.Fatalf("node %s lists the outsider: %+v", id, n)
			}
		}
		if a := alive(c.nodes("4")); len(a) != 1 {
			t.Fatalf("the outsider sees members: %v", a)
		}
		time.Sleep(time.Second)
	}
	// Still a healthy cluster.
	if a := alive(c.nodes("2")); len(a) != 3 {
		t.Fatalf("members after the outsider: %v", a)
	}
}
