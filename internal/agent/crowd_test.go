package agent

import (
	"testing"
	"testing/synctest"
	"time"
)

// Under the default policy a job waits min_age (2 s) before it moves,
// unless its node is crowded (sched.DefaultCrowd), on whole agents:
// seven jobs typed on one of three 1-CPU nodes (7 against 1 with one
// more) spread once they are crowd_min_age (250 ms) old; three (3 against
// 1) stay until min_age, then spread.
func TestAgentsSpreadACrowdedBurstYoung(t *testing.T) {
	for _, tc := range []struct {
		jobs       int
		crowded    bool
		stay, from time.Duration // the jobs stay on n1 until stay; all nodes run some from from on
	}{
		{7, true, 250 * time.Millisecond, 700 * time.Millisecond},
		{3, false, 1900 * time.Millisecond, 2500 * time.Millisecond},
	} {
		synctest.Test(t, func(t *testing.T) {
			c := newCluster(t, 3, 12, faults{}, "mosix")
			time.Sleep(3 * time.Second) // every node's load vector has the others
			start := time.Now()
			burst := c.run(0, tc.jobs, "n1")
			for time.Since(start) < tc.stay {
				if on := c.runningOn(burst); on["n1"] != tc.jobs {
					t.Fatalf("%d jobs (crowded: %v): %v after the start they run %v", tc.jobs, tc.crowded, time.Since(start), on)
				}
				time.Sleep(50 * time.Millisecond)
			}
			c.waitFor("the burst on every node", time.Minute, func() bool { return len(c.runningOn(burst)) == 3 })
			if d := time.Since(start); d > tc.from {
				t.Fatalf("%d jobs (crowded: %v): spread after %v, want within %v", tc.jobs, tc.crowded, d, tc.from)
			}
		})
	}
}
