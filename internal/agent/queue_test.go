package agent

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/api"
	"roam/internal/job"
)

// runMem is a run of n jobs of --mem mb MiB by who from node i.
func (c *cluster) runMem(i int, who Caller, n int, mb int64) api.RunResponse {
	c.t.Helper()
	resp, err := c.nodes[i].a.launch.Run(who, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: n, MemBytes: mb << 20})
	if err != nil {
		c.t.Fatalf("run -n %d --mem %dM: %v", n, mb, err)
	}
	return resp
}

// runsOn counts the jobs that run, by node, and fails the test when a
// node holds more of them than fit in perNode, or one runs twice.
func (c *cluster) runsOn(ids []string, perNode int) map[string]int {
	c.t.Helper()
	on := map[string]int{}
	for _, id := range ids {
		r, _ := c.world.copies(id)
		if len(r) > 1 {
			c.t.Fatalf("job %s runs on %v", id, r)
		}
		for _, n := range r {
			if on[n]++; on[n] > perNode {
				c.t.Fatalf("node %s runs %d of the jobs; it has room for %d", n, on[n], perNode)
			}
		}
	}
	return on
}

// whyPending is why roam ps says each pending job of who waits.
func (c *cluster) whyPending(i int, who Caller) map[string]string {
	out := map[string]string{}
	for _, j := range c.nodes[i].a.PS(who, false) {
		if j.State == api.StatePending {
			out[j.ID] = j.PendingWhy
		}
	}
	return out
}

// A run that fits on no node now is pending at its home, with the reason
// in roam ps, and its jobs start as room comes, never more on a node
// than its memory for jobs takes: 20 jobs of --mem 160M on three nodes
// of 320 MiB, 6 at a time. Another user's lone job, run when the cluster
// is full, starts at the next place freed, before the sweep's next one;
// its stdin waits for it. The pending jobs survive a restart of their
// home, and every job ends once, with its status.
func TestAgentsQueueStartsAsRoomComes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 51, faults{}, "static", func(c *Config) { c.Jobs.MemoryBytes = 320 << 20 })
		resp := c.runMem(0, sweepUser, 20, 160)
		ids := resp.IDs
		c.waitFor("6 run, 14 pending for room", time.Minute, func() bool {
			on := c.runsOn(ids, 2)
			why := c.whyPending(0, sweepUser)
			return on["n1"]+on["n2"]+on["n3"] == 6 && len(why) == 14 && why[ids[19]] == "no node has room for --mem 160M now"
		})
		other := Caller{UID: 1002, GID: 1002}
		lone, err := c.nodes[0].a.launch.Run(other, api.RunRequest{Argv: []string{"/bin/cat"}, Cwd: "/", Count: 1, MemBytes: 160 << 20, Stdin: true})
		if err != nil || lone.Sweep != "" {
			t.Fatalf("a lone job: %+v %v", lone, err)
		}
		loneID := lone.IDs[0]
		c.waitFor("the lone job's reason", time.Minute, func() bool {
			return c.whyPending(2, other)[loneID] == "no node has room for --mem 160M now"
		})
		if res, err := c.nodes[1].a.news.Stdin(other, loneID, []byte("x"), false); err != nil || !res.Pending {
			t.Fatalf("stdin of a pending job: %+v %v", res, err)
		}

		// The first place freed is the other user's: it has none running.
		all := append(append([]string(nil), ids...), loneID)
		ended := 0
		exitNext := func() {
			var id string
			c.waitFor("a job runs", time.Minute, func() bool {
				for _, j := range all {
					if r, _ := c.world.copies(j); len(r) == 1 {
						id = j
						return true
					}
				}
				return false
			})
			c.exitJob(id, 0)
			ended++
			c.runsOn(all, 2)
		}
		exitNext()
		c.waitFor("a job starts in the freed place", time.Minute, func() bool { return c.homeRec(loneID).State == job.StateRunning })
		if n := len(c.whyPending(0, sweepUser)); n != 14 {
			t.Fatalf("%d of the sweep pending once the lone job started; want 14", n)
		}
		for ended < 8 {
			exitNext()
		}
		// The home restarts with jobs pending: they stay, and start.
		c.waitFor("the queue settles", time.Minute, func() bool { return len(c.whyPending(1, sweepUser)) == 7 })
		c.crash(0)
		c.start(0)
		c.waitFor("the queue back", time.Minute, func() bool {
			return c.whyPending(0, sweepUser)[ids[19]] == "no node has room for --mem 160M now"
		})
		over := func() bool {
			return c.sweepOf(0, resp.Sweep, sweepUser).Ended && c.homeRec(loneID).Over()
		}
		for !over() {
			exitNext()
			c.waitFor("the end taken", time.Minute, func() bool {
				on := c.runsOn(all, 2)
				return len(on) > 0 || over()
			})
		}
		if s := c.sweepOf(0, resp.Sweep, sweepUser); s.Summary != "20 jobs: 20 ok, 0 failed, 0 lost" {
			t.Fatalf("summary %q", s.Summary)
		}
	})
}

// A sweep whose --mem names a field of its lines (roam run --mem {2}M)
// gives each job its own request: kept in its record, admitted against
// its own size, and said in roam ps while it waits, also after its home
// restarts; its lowest index waits first, and the smaller ones behind it
// wait for it. Requests that
// do not match the run are refused, naming what is wrong, and start
// nothing.
func TestAgentsEachIndexItsOwnMem(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 52, faults{}, "static", func(c *Config) { c.Jobs.MemoryBytes = 320 << 20 })
		home := c.nodes[0].a
		run := func(mems []int64, mem int64) (api.RunResponse, error) {
			return home.launch.Run(sweepUser, api.RunRequest{Argv: []string{"/bin/true", "{1}"}, Cwd: "/", Count: 6, MemBytes: mem,
				SweepRequest: api.SweepRequest{Args: []string{"a", "b", "c", "d", "e", "f"}, Mems: mems}})
		}
		for _, bad := range []struct {
			mems []int64
			mem  int64
			want string
		}{
			{[]int64{32 << 20, 32 << 20}, 0, "mems (each index's --mem): 2 for -n 6"},
			{[]int64{32 << 20, 32 << 20, 32 << 20, 32 << 20, 32 << 20, 32 << 20}, 64 << 20, "mems (each index's --mem) and mem_bytes (--mem) both given"},
			{[]int64{32 << 20, 32 << 20, 4 << 20, 32 << 20, 32 << 20, 32 << 20}, 0, "index 2: --mem 4M is out of range"},
		} {
			if _, err := run(bad.mems, bad.mem); err == nil || !strings.Contains(err.Error(), bad.want) {
				t.Fatalf("mems %v, mem_bytes %d: %v; want %q", bad.mems, bad.mem, err, bad.want)
			}
		}
		if n := len(home.PS(sweepUser, false)); n != 0 {
			t.Fatalf("refused runs left %d jobs", n)
		}
		mems := []int64{256 << 20, 256 << 20, 256 << 20, 256 << 20, 32 << 20, 32 << 20}
		resp, err := run(mems, 0)
		if err != nil {
			t.Fatal(err)
		}
		ids := resp.IDs
		for i, id := range ids {
			if got := c.homeRec(id).Req.MemBytes; got != mems[i] {
				t.Fatalf("index %d's record asks %d bytes, its line %d", i, got, mems[i])
			}
		}
		// Three nodes of 320 MiB: indices 0-2 take one each; 3 fits
		// nowhere, and 4 and 5 (32M, which would fit) wait behind it.
		c.waitFor("3 run, index 3 waits for its own 256M, 4 and 5 behind it", time.Minute, func() bool {
			on := c.runsOn(ids, 1)
			why := c.whyPending(0, sweepUser)
			return on["n1"]+on["n2"]+on["n3"] == 3 && len(why) == 3 && why[ids[3]] == "no node has room for --mem 256M now"
		})
		// The home restarts: each pending job keeps its own request.
		c.crash(0)
		c.start(0)
		c.waitFor("the queue back, index 3 waiting for its own 256M", time.Minute, func() bool {
			return c.whyPending(0, sweepUser)[ids[3]] == "no node has room for --mem 256M now"
		})
		for i, id := range ids {
			if got := c.homeRec(id).Req.MemBytes; got != mems[i] {
				t.Fatalf("after the home's restart index %d's record asks %d bytes, its line %d", i, got, mems[i])
			}
		}
		c.exitJob(ids[0], 0)
		// Index 3 takes the room freed; 4 and 5 fit beside the others.
		c.waitFor("every other index runs", time.Minute, func() bool {
			return len(c.whyPending(0, sweepUser)) == 0 && c.homeRec(ids[5]).State == job.StateRunning
		})
		held := map[string]int64{}
		for i, id := range ids[1:] {
			r := c.homeRec(id)
			if held[r.Node] += mems[i+1]; held[r.Node] > 320<<20 {
				t.Fatalf("node %s holds %d MiB of requests, more than its 320", r.Node, held[r.Node]>>20)
			}
		}
	})
}

// Fairness between users of two homes: while user A has thousands of
// jobs pending at node 1, user B's first job, run at node 2, starts
// within 5 s, as A's jobs end; A's go on meanwhile. Every job runs at
// most once, no node more than it has room for, whichever home's start
// its admission takes.
func TestAgentsQueueFairAcrossHomes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 4, 52, faults{}, "static", func(c *Config) { c.Jobs.MemoryBytes = 256 << 20 })
		userA, userB := sweepUser, Caller{UID: 1002, GID: 1002}
		a := c.runMem(0, userA, 3000, 160)
		c.waitFor("A runs one job a node", time.Minute, func() bool { return len(c.runsOn(a.IDs, 1)) == 4 })
		b := c.runMem(1, userB, 1, 160)
		submitted := time.Now()
		// A's jobs end one every half second, node 2's (B's home) last.
		order := []string{"n3", "n4", "n1", "n2"}
		// Until B's job runs on its node (started: a start a node refused
		// for room it no longer had puts the job back in the queue, and
		// only another end makes room again).
		bRuns := func() bool { r, _ := c.world.copies(b.IDs[0]); return len(r) == 1 }
		for k := 0; !bRuns(); k++ {
			if time.Since(submitted) > 5*time.Second {
				t.Fatalf("B's first job still pending %v after its run", time.Since(submitted))
			}
			node := order[k%len(order)]
			for _, id := range a.IDs {
				if r, _ := c.world.copies(id); len(r) == 1 && r[0] == node {
					c.exitJob(id, 0)
					break
				}
			}
			time.Sleep(500 * time.Millisecond)
			c.runsOn(append(a.IDs, b.IDs[0]), 1)
		}
		r, _ := c.world.copies(b.IDs[0])
		pending := len(c.whyPending(0, userA))
		t.Logf("B's first job runs on %s, %.1f s after its run; A has %d pending", r[0], time.Since(submitted).Seconds(), pending)
		if pending < 2990 {
			t.Fatalf("A has %d pending", pending)
		}
		c.waitFor("A's next jobs start", time.Minute, func() bool { return len(c.runsOn(a.IDs, 1)) >= 3 })
		if _, err := c.nodes[2].a.control.Kill(userA, api.KillRequest{IDs: []string{a.Sweep}, Signal: 15}); err != nil {
			t.Fatal(err)
		}
		c.waitFor("A's sweep ends", time.Minute, func() bool { return c.sweepOf(0, a.Sweep, userA).Ended })
		if s := c.sweepOf(0, a.Sweep, userA); !strings.HasPrefix(s.Summary, "3000 jobs: ") || len(s.Lost) > 0 {
			t.Fatalf("A's sweep: %s", s.Summary)
		}
	})
}
