package e2e

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// 64 nodes of 0.02 CPU each come up on this machine and converge: every
// node sees every other alive. 64 CPU-bound jobs typed on node 1 spread
// to at least 56 nodes, although each node's load vector holds 8 entries:
// a node whose load is unknown is never taken for an idle one (that would
// put the jobs on the few nodes heard of last), nor for a loaded one (the
// jobs would stay on the 8 nodes node 1 knows).
func TestSixtyFourNodes(t *testing.T) {
	const n = 64
	c := upCluster(t, "e2ebig", 33, "--nodes", strconv.Itoa(n), "--cpu", "0.02")
	up := time.Now()
	waitFor(t, 90*time.Second, "every node sees all 64 alive", func() (bool, string) {
		for i := 1; i <= n; i++ {
			if a := alive(c.nodes(strconv.Itoa(i))); len(a) != n {
				return false, fmt.Sprintf("node %d sees %d alive", i, len(a))
			}
		}
		return true, ""
	})
	t.Logf("all %d alive everywhere %v after up", n, time.Since(up).Round(time.Millisecond))

	burn := workload(t, "burn")
	out := c.mustRun("--node", "1", "run", "-d", "-n", strconv.Itoa(n), burn, "100000")
	ids := map[string]bool{}
	for _, id := range strings.Fields(out) {
		ids[id] = true
	}
	if len(ids) != n {
		t.Fatalf("run -d -n %d printed %q", n, out)
	}
	var spread map[string]int
	waitFor(t, 3*time.Minute, "64 jobs on at least 56 nodes", func() (bool, string) {
		spread = perNode(c.ps("1"), ids)
		return len(spread) >= 56, fmt.Sprintf("%d nodes: %v", len(spread), spread)
	})
	var counts []int
	for _, k := range spread {
		counts = append(counts, k)
	}
	sort.Sort(sort.Reverse(sort.IntSlice(counts)))
	t.Logf("64 jobs on %d nodes %v after up; most on one node: %d", len(spread), time.Since(up).Round(time.Second), counts[0])

	// Balancing: 6 more typed with --on 1 leave node 1, by migration,
	// until no node runs more than 2 of the 70 jobs (as few as 64 nodes
	// allow).
	more := c.runJobs("1", 6, burn, "100000")
	for id := range more {
		ids[id] = true
	}
	start := time.Now()
	waitFor(t, 3*time.Minute, "no node with more than 2 jobs", func() (bool, string) {
		on := perNode(c.ps("1"), ids)
		for node, k := range on {
			if k > 2 {
				return false, fmt.Sprintf("node %s runs %d", node, k)
			}
		}
		return true, ""
	})
	t.Logf("6 more jobs on node 1 balanced in %v", time.Since(start).Round(time.Second))
}
