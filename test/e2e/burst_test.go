package e2e

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"roam/internal/api"
	"roam/internal/bench"
	"roam/internal/sched"
)

// The burst under the default policy, as a user types it on make
// demo's cluster: twelve jobs of 2 CPU-seconds, `roam run -n 12 --on 4`
// attached, on the 0.2-CPU node of 0.8, 0.4, 0.4 and 0.2 CPUs. The jobs
// are younger than min_age (2 s) when they leave, as their node is
// crowded: the first move comes well before 2 s, none is moved younger
// than crowd_min_age, and a job moved younger than min_age was moved for
// that reason. How long it takes against the ideal is roam bench
// burst's to measure (docs/benchmarks.md); this logs it.
func TestDefaultPolicySpreadsABurst(t *testing.T) {
	burn := workload(t, "burn")
	c := upCluster(t, "e2ebst1", 76, "--nodes", "4", "--cpu", "0.8,0.4,0.4,0.2")
	c.waitAllAlive(4)
	waitFor(t, 15*time.Second, "node 4 knows every node's load", func() (bool, string) {
		known := 0
		for _, n := range c.nodes("4") {
			if n.Alive && (n.Self || n.Load != nil) {
				known++
			}
		}
		return known == 4, fmt.Sprintf("%d of 4 known", known)
	})
	began := time.Now()
	out, err := c.roamAs(jobUser, "--node", "4", "run", "-n", "12", "--on", "4", burn, "2", "0").CombinedOutput()
	took := time.Since(began)
	if err != nil {
		t.Fatalf("roam run: %v: %s", err, out)
	}
	used := 0.0
	dones := regexp.MustCompile(`burn: done cpu=([0-9.]+)`).FindAllStringSubmatch(string(out), -1)
	for _, m := range dones {
		v, _ := strconv.ParseFloat(m[1], 64)
		used += v
	}
	if len(dones) != 12 {
		t.Fatalf("%d of 12 jobs said they were done:\n%s", len(dones), out)
	}
	var mine []api.Job
	for _, j := range c.ps("4") {
		if j.User == jobUser.name {
			mine = append(mine, j)
		}
	}
	if len(mine) != 12 {
		t.Fatalf("roam ps shows %d of the user's jobs, want 12", len(mine))
	}
	sort.Slice(mine, func(a, b int) bool { return mine[a].ID < mine[b].ID })
	since := func(at time.Time) string { return fmt.Sprintf("%.2f s", at.Sub(began).Seconds()) }
	timeline := func() {
		for _, j := range mine {
			var moves []string
			for _, m := range j.MigrationLog {
				moves = append(moves, fmt.Sprintf("%s %s->%s (freeze %.0f ms)", since(m.At), m.From, m.To, m.FreezeMS))
			}
			t.Logf("job %s: started %s, ended %s on %s; %s", j.ID, since(j.Started), since(j.Ended), j.Node, strings.Join(moves, ", "))
		}
	}
	var firstStart, firstMove time.Time
	started := map[string]time.Time{}
	for _, j := range mine {
		started[j.ID] = j.Started
		if firstStart.IsZero() || j.Started.Before(firstStart) {
			firstStart = j.Started
		}
		for _, m := range j.MigrationLog {
			if age := m.At.Sub(j.Started); age < sched.DefaultCrowdMinAge {
				timeline()
				t.Fatalf("job %s moved %v after its start, under crowd_min_age %v", j.ID, age, sched.DefaultCrowdMinAge)
			}
			if firstMove.IsZero() || m.At.Before(firstMove) {
				firstMove = m.At
			}
		}
	}
	bal, _ := bench.BalancedAt(mine, map[string]float64{"1": 0.8, "2": 0.4, "3": 0.4, "4": 0.2})
	t.Logf("roam run took %.2f s, %.2f × the ideal %.2f s (%.2f CPU-s used / 1.8); first start %s, first move %s, balanced %s",
		took.Seconds(), took.Seconds()/(used/1.8), used/1.8, used, since(firstStart), since(firstMove), since(bal))
	// The round runs when the jobs come to crowd_min_age (250 ms); its
	// moves begin once their targets admit them: 0.3 s on an idle
	// machine, 1.1 s beside other clusters' tests. With min_age alone the
	// first began at 2.04 s.
	if firstMove.IsZero() || firstMove.Sub(firstStart) > 1500*time.Millisecond {
		timeline()
		t.Fatalf("first move %s after the first start, want within 1.5 s", firstMove.Sub(firstStart))
	}
	young := 0
	for _, e := range c.events("1") { // every node's
		if e.Kind != "migrate" || started[e.Job].IsZero() || e.At.Sub(started[e.Job]) >= sched.DefaultMinAge {
			continue
		}
		young++
		if !strings.Contains(e.Why, "but its node is crowded") {
			timeline()
			t.Fatalf("job %s moved %v after its start, under min_age, not for its crowded node: %s", e.Job, e.At.Sub(started[e.Job]), e.Why)
		}
	}
	if young == 0 {
		timeline()
		t.Fatal("no move of a job younger than min_age in the events")
	}
}
