package agent

import (
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/api"
	"roam/internal/job"
	"roam/internal/sched"
)

// psRow is job id's row in roam ps at node i, as who sees it.
func (c *cluster) psRow(i int, who Caller, id string) api.Job {
	for _, j := range c.nodes[i].a.PS(who, false) {
		if j.ID == id {
			return j
		}
	}
	return api.Job{}
}

// The queue's second level, under the feedback policy: a sweep of 4
// jobs of --mem 160M on two nodes with room for one each. The first two
// run; once each has had its quantum while the fresh two wait, both are
// preempted (checkpointed, kept on their nodes, ended there): pending
// again in roam ps, with their CPU and why, while the fresh two run;
// those are never preempted (no fresh job waits behind them). As the
// fresh ones end, the preempted ones are restored from their checkpoints,
// their output going on in the same spool, in order, their CPU counting
// what they had before; every job ends once, status 0.
func TestAgentsPreemptForFreshJobs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 43, faults{}, "feedback", func(c *Config) { c.Jobs.MemoryBytes = 160 << 20 })
		resp := c.runMem(0, sweepUser, 4, 160)
		ids := resp.IDs
		c.waitFor("two run, two pending", time.Minute, func() bool {
			on := c.runsOn(ids, 1)
			return on["n1"]+on["n2"] == 2 && len(c.whyPending(0, sweepUser)) == 2
		})
		first := []string{}
		for _, id := range ids {
			if r, _ := c.world.copies(id); len(r) == 1 {
				first = append(first, id)
				c.say(nodeIndex(r[0]), id, id+" before")
			}
		}
		c.waitFor("the first two preempted, the fresh two running", time.Minute, func() bool {
			c.runsOn(ids, 1)
			for _, id := range first {
				if r := c.homeRec(id); r.State != job.StatePending || r.Preempted.IsZero() {
					return false
				}
			}
			return len(c.whyPending(0, sweepUser)) == 2
		})
		for _, id := range first {
			row := c.psRow(0, sweepUser, id)
			if row.CPUSeconds < sched.DefaultPreemptAfter.Seconds() || !strings.HasPrefix(row.PendingWhy, "preempted") {
				t.Fatalf("%s preempted: ps says cpu %.2f, why %q", id, row.CPUSeconds, row.PendingWhy)
			}
			if got := c.homeOutput(id); got != id+" before\n" {
				t.Fatalf("%s preempted: output %q", id, got)
			}
		}
		fresh := []string{}
		for _, id := range ids {
			if c.homeRec(id).Preempted.IsZero() {
				fresh = append(fresh, id)
			}
		}
		// Past their quantum too, but nothing fresh waits: they run on.
		time.Sleep(5 * time.Second)
		for _, id := range fresh {
			if r := c.homeRec(id); r.State != job.StateRunning || !r.Preempted.IsZero() {
				t.Fatalf("fresh job %s: %s, preempted %v", id, r.State, r.Preempted)
			}
			c.exitJob(id, 0)
		}
		c.waitFor("the preempted ones restored", time.Minute, func() bool {
			c.runsOn(ids, 1)
			for _, id := range first {
				if r, _ := c.world.copies(id); len(r) != 1 || c.homeRec(id).State != job.StateRunning {
					return false
				}
			}
			return true
		})
		for _, id := range first {
			r := c.homeRec(id)
			if len(r.Restarts) != 1 || r.Inc != 1 || !strings.Contains(r.Restarts[0].Why, "its turn again") {
				t.Fatalf("%s: inc %d, restarts %+v", id, r.Inc, r.Restarts)
			}
			on, _ := c.world.copies(id)
			c.say(nodeIndex(on[0]), id, id+" after")
		}
		for _, id := range first {
			c.waitFor(id+"'s output after", time.Minute, func() bool { return c.homeOutput(id) == id+" before\n"+id+" after\n" })
			if row := c.psRow(0, sweepUser, id); row.CPUSeconds < sched.DefaultPreemptAfter.Seconds() {
				t.Fatalf("%s restored: ps says cpu %.2f, less than it had before", id, row.CPUSeconds)
			}
			c.exitJob(id, 0)
		}
		c.waitFor("the sweep ends", time.Minute, func() bool { return c.sweepOf(0, resp.Sweep, sweepUser).Ended })
		if s := c.sweepOf(0, resp.Sweep, sweepUser); s.Summary != "4 jobs: 4 ok, 0 failed, 0 lost" {
			t.Fatalf("summary %q", s.Summary)
		}
	})
}

// Nothing is lost when a preemption fails. A checkpoint that fails (CRIU
// refused the dump) leaves the job running where it was, and its home
// does not ask again though fresh jobs still wait. A job whose restores
// all fail goes back to the line after each, and after MaxRestoreTries
// is lost with the reason; the fresh jobs end as they would have.
func TestAgentsPreemptionFailuresLoseNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 44, faults{}, "feedback", func(c *Config) { c.Jobs.MemoryBytes = 160 << 20 })
		c.world.mu.Lock()
		c.world.dumpFail = 1
		c.world.mu.Unlock()
		resp := c.runMem(0, sweepUser, 4, 160)
		ids := resp.IDs
		var first []string
		c.waitFor("both checkpoints failed", time.Minute, func() bool {
			first = first[:0]
			for _, id := range ids {
				if r := c.homeRec(id); len(r.Checkpoints) == 1 && !r.Checkpoints[0].OK {
					first = append(first, id)
				}
			}
			return len(first) == 2
		})
		c.world.mu.Lock()
		c.world.dumpFail, c.world.restoreFail = 0, 1
		c.world.mu.Unlock()
		time.Sleep(10 * time.Second)
		for _, id := range first {
			r := c.homeRec(id)
			if on, _ := c.world.copies(id); len(on) != 1 || r.State != job.StateRunning || len(r.Checkpoints) != 1 || !r.Preempted.IsZero() {
				t.Fatalf("%s after its failed checkpoint: runs on %v, %s, %d checkpoints, preempted %v", id, on, r.State, len(r.Checkpoints), r.Preempted)
			}
		}
		if n := len(c.whyPending(0, sweepUser)); n != 2 {
			t.Fatalf("%d pending; the fresh two should wait still", n)
		}
		// The first two end; the fresh two start and end.
		for _, id := range first {
			c.exitJob(id, 0)
		}
		var fresh []string
		for _, id := range ids {
			if !slices.Contains(first, id) {
				fresh = append(fresh, id)
			}
		}
		c.waitFor("the fresh two run", time.Minute, func() bool {
			c.runsOn(ids, 1)
			return c.homeRec(fresh[0]).State == job.StateRunning && c.homeRec(fresh[1]).State == job.StateRunning
		})
		for _, id := range fresh {
			c.exitJob(id, 0)
		}
		c.waitFor("the sweep ends", time.Minute, func() bool { return c.sweepOf(0, resp.Sweep, sweepUser).Ended })
		if s := c.sweepOf(0, resp.Sweep, sweepUser); s.Summary != "4 jobs: 4 ok, 0 failed, 0 lost" {
			t.Fatalf("summary %q", s.Summary)
		}

		// A second sweep, whose restores all fail: its first two are
		// preempted, its fresh two run and end, and the restores of the
		// first two fail, each back in the line, then lost.
		resp = c.runMem(0, sweepUser, 4, 160)
		ids = resp.IDs
		var preempted []string
		c.waitFor("two preempted", time.Minute, func() bool {
			preempted = preempted[:0]
			for _, id := range ids {
				if !c.homeRec(id).Preempted.IsZero() {
					preempted = append(preempted, id)
				}
			}
			return len(preempted) == 2
		})
		for _, id := range ids {
			if !slices.Contains(preempted, id) {
				c.waitFor(id+" runs", time.Minute, func() bool { return c.homeRec(id).State == job.StateRunning })
				c.exitJob(id, 0)
			}
		}
		c.waitFor("the two lost after their restores failed", 2*time.Minute, func() bool {
			c.runsOn(ids, 1)
			lost := 0
			for _, id := range ids {
				r := c.homeRec(id)
				if r.State == job.StateLost && strings.Contains(r.EndReason, "restart from its checkpoint failed 3 times") {
					lost++
				}
			}
			return lost == 2
		})
		c.waitFor("the sweep ends", time.Minute, func() bool { return c.sweepOf(0, resp.Sweep, sweepUser).Ended })
		if s := c.sweepOf(0, resp.Sweep, sweepUser); !strings.HasPrefix(s.Summary, "4 jobs: 2 ok, 0 failed, 2 lost") {
			t.Fatalf("summary %q", s.Summary)
		}
	})
}

// A sweep run with --pin is never preempted, however long its jobs run
// while others of it wait: a pinned job stays where and as it runs.
func TestAgentsNeverPreemptAPinnedJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 45, faults{}, "feedback", func(c *Config) { c.Jobs.MemoryBytes = 160 << 20 })
		resp, err := c.nodes[0].a.launch.Run(sweepUser, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 3, MemBytes: 160 << 20, Pin: true})
		if err != nil {
			t.Fatal(err)
		}
		c.waitFor("two run, one pending", time.Minute, func() bool {
			on := c.runsOn(resp.IDs, 1)
			return on["n1"]+on["n2"] == 2 && len(c.whyPending(0, sweepUser)) == 1
		})
		time.Sleep(10 * time.Second)
		for _, id := range resp.IDs {
			if r := c.homeRec(id); !r.Preempted.IsZero() || len(r.Checkpoints) != 0 {
				t.Fatalf("pinned job %s: preempted %v, checkpoints %+v", id, r.Preempted, r.Checkpoints)
			}
		}
		c.runsOn(resp.IDs, 1)
	})
}
