package agent

import (
	"testing"
	"testing/synctest"
)

// A scheduling round reads /proc for every job with none of the agent's
// locks held: memberlist's LocalState (which must not block) takes the
// scheduler's, and the API the job table's, while a slow /proc (a job
// with thousands of threads, a stalled node) is read. The round still
// sees the job. (The membership's lock is package members' own, held
// only inside its methods, which call out to nothing.)
func TestSnapshotProbesWithNoLockHeld(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 32, faults{}, "static")
		id := runOneOn(t, c, Caller{UID: 70001, GID: 70001}, "n1")
		a, n1 := c.nodes[0].a, c.nodes[0].fn
		probes, held := 0, []string{}
		n1.mu.Lock()
		n1.onActivity = func() {
			probes++
			if !a.jobs.mu.TryLock() {
				held = append(held, "the job table's")
				return
			}
			a.jobs.mu.Unlock()
			// memberlist's push/pull asks now; it takes the rounds' lock,
			// and roam nodes the members'. Were either held here, the
			// lock-order check (make test's tag lockcheck) would panic
			// on the second take, and a build without it would hang.
			(*delegate)(a).LocalState(false)
			a.Nodes()
		}
		n1.mu.Unlock()
		snap := a.snapshot()
		n1.mu.Lock()
		n1.onActivity = nil
		n1.mu.Unlock()
		if probes == 0 || len(held) != 0 {
			t.Fatalf("%d probes; held while probing: %v", probes, held)
		}
		if len(snap.Jobs) != 1 || snap.Jobs[0].ID != id {
			t.Fatalf("the round saw %+v, want job %s", snap.Jobs, id)
		}
	})
}
