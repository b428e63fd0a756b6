package agent

import (
	"testing"
	"testing/synctest"
	"time"
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
			// The API asks now: roam ps takes the job table's lock,
			// memberlist's push/pull the rounds', roam nodes the
			// members'. Built with the tag lockcheck (make test), the
			// job table's is asked of the lock-order check, which knows
			// who holds it; the other two are taken, and held here the
			// check would record the second take (TestMain fails on it).
			if a.jobs.LockHeldHere() || !freeSoon(a.jobs.LockFree) {
				held = append(held, "the job table's")
				return
			}
			a.gossip.LocalState(false)
			a.Nodes()
		}
		n1.mu.Unlock()
		snap := a.sched.Snapshot()
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

// freeSoon says whether a lock is free soon (free says whether it is
// now): another goroutine may hold it a moment. (One that this goroutine
// holds hangs the bubble, whose clock stops while a goroutine waits on a
// mutex; lockorder.HeldHere tells it first under the tag lockcheck.)
func freeSoon(free func() bool) bool {
	for range 1000 {
		if free() {
			return true
		}
		time.Sleep(time.Millisecond)
	}
	return false
}
