package agent

import (
	"bytes"
	"errors"
	"hash/fnv"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/ckpt"
	"roam/internal/job"
)

// A home whose job's node killed it by its fence, and that finds no node
// to restart it on but that one (the others draining here; a home cut
// off itself sees none), does not lose it: it tries again, with backoff,
// and restarts it once a node comes back (n3 resumes). The chaos run's
// home, cut off itself, placed the restart on the node that had fenced
// the job, whose consent refused it ("no live node to restart job ...
// on"), marked the job lost at that first try and never tried again once
// the link was back.
func TestAgentsRestartWaitsForANode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, fenced := fencedOnN2Alone(t, 50)
		n1 := c.nodes[0]
		time.Sleep(time.Minute) // the home's tries find no node but n2
		if r := c.homeRec(fenced); r.State != job.StateRunning || r.Inc != 0 {
			t.Fatalf("with no node to restart it on: %s on %s, inc %d; want it held for the restart", r.State, r.Node, r.Inc)
		}
		c.resumeAndRestartOnN3(n1, fenced, "its home restarts it on n3", time.Minute)
		c.intact()
	})
}

// A job's kept checkpoint is dropped where it is kept when the job ends,
// and its home's record names it no more: restarted from its owner's
// file, the job is not taken for one whose checkpoint is kept. The chaos
// run's home, whose record still named it, restarted such a job after
// its node's loss from that checkpoint, which its keeper had dropped
// ("node 4 keeps no checkpoint of job 4.6"), and lost it.
func TestAgentsRecordNamesOnlyKeptCheckpoints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 51, faults{}, "static")
		owner := Caller{UID: 70001, GID: 70001}
		n1 := c.nodes[0].a
		resp, err := n1.launch.Run(owner, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 1, On: "n2", CheckpointEvery: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		id := resp.IDs[0]
		c.waitFor("a checkpoint kept at its home", time.Minute, func() bool {
			r := c.homeRec(id)
			return r.Newest != nil && r.Newest.OK && r.Newest.StoredOn == "n1" && n1.keeper.Stored(id) != ""
		})
		file := checkpointOf(t, c, owner, id)
		c.exitJob(id, 137) // roam kill -s KILL
		c.waitFor("its end, and its kept checkpoint dropped", time.Minute, func() bool {
			return c.homeRec(id).State == job.StateFinished && n1.keeper.Stored(id) == ""
		})
		if _, _, err := restart(c, owner, bytes.NewReader(file), int64(len(file))); err != nil {
			t.Fatalf("restart of the owner's file: %v", err)
		}
		if r := c.homeRec(id); r.State != job.StateRunning || r.Inc != 1 || r.Newest != nil {
			t.Fatalf("restarted: %s inc %d, newest %+v (kept: %q): want no kept checkpoint named", r.State, r.Inc, r.Newest, n1.keeper.Stored(id))
		}
		c.intact()
	})
}

// A job whose migration stalls (its restore takes past fence.lease here;
// a destination cut off did so in the chaos run) keeps its lease on its
// source while its home is in reach: nothing else of that home runs on
// the node, and the moving job's news waits for its migration, so the
// push loop sends its home a heartbeat of it. The chaos run's job, at
// its home itself and moving to a node cut off, was stopped at
// fence.lease and killed at fence.kill (137) with its home in reach.
func TestAgentsLeaseOfAStalledMigration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 52, faults{}, "static", func(cfg *Config) {
			cfg.Fence.Lease, cfg.Fence.Kill, cfg.Fence.Margin = 4*time.Second, 12*time.Second, 2*time.Second
		})
		n2 := c.nodes[1]
		resp, err := c.nodes[0].a.launch.Run(Caller{}, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 1, On: "n2", CheckpointEvery: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		id := resp.IDs[0]
		c.waitFor("a checkpoint kept off n2, and n2 fencing the job", time.Minute, func() bool {
			r := c.homeRec(id)
			l, ok := n2.a.jobs.LocalRec(id)
			return r.Newest != nil && r.Newest.OK && r.Newest.StoredOn == "n1" && ok && l.Checkpointed
		})
		n3 := c.nodes[2].fn
		n3.mu.Lock()
		n3.onRestore = func(ckpt.RestoreSpec) { time.Sleep(7 * time.Second) } // past fence.lease
		n3.mu.Unlock()
		if _, err := n2.a.out.MigrateOut(peer.MigrateOutRequest{ID: id, To: "n3", Manual: true}); err != nil {
			t.Fatalf("the stalled migration: %v", err)
		}
		if c.stops(1) != 0 {
			t.Fatalf("n2 stopped the job %d times while it moved, its home in reach", c.stops(1))
		}
		c.waitFor("the job running on n3", time.Minute, func() bool {
			run, _ := c.world.copies(id)
			r := c.homeRec(id)
			return len(run) == 1 && run[0] == "n3" && r.Node == "n3" && r.Inc == 0
		})
		c.intact()
	})
}

// A migration whose restore takes longer than fence.kill less the lease's
// age in its header (a restore held 20 s, fence.kill 8 s) does not end in
// the destination's fence killing the copy as it arrives: the source's
// heartbeats renew its reach of the home while the job moves, and the
// commit carries the lease's age then (peer.MigrateCommit's lease_age),
// from which the destination counts until the home takes the copy's news
// from there (held back here for a second after the commit). Counted from
// the header's age, the copy was killed at once and its home restarted it
// from its checkpoint.
func TestAgentsLeaseRenewedThroughASlowRestore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 53, faults{}, "static", func(cfg *Config) {
			cfg.Fence.Lease, cfg.Fence.Kill, cfg.Fence.Margin = 4*time.Second, 8*time.Second, 2*time.Second
		})
		n2, n3 := c.nodes[1], c.nodes[2]
		resp, err := c.nodes[0].a.launch.Run(Caller{}, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 1, On: "n2", CheckpointEvery: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		id := resp.IDs[0]
		c.waitFor("a checkpoint kept off n2, and n2 fencing the job", time.Minute, func() bool {
			r := c.homeRec(id)
			l, ok := n2.a.jobs.LocalRec(id)
			return r.Newest != nil && r.Newest.OK && r.Newest.StoredOn != "n2" && ok && l.Checkpointed
		})
		n3.fn.mu.Lock()
		n3.fn.onRestore = func(ckpt.RestoreSpec) {
			time.Sleep(20 * time.Second) // past fence.kill
			// The home does not take the copy's news from n3 at once
			// (which would renew its lease there before its fence looks).
			c.net.partition(n3.host, c.nodes[0].host)
		}
		n3.fn.mu.Unlock()
		// n2 has not reached the home for 2 s as the move begins (its
		// header's age: 0, a push just acknowledged, would be none), and
		// reaches it again while the job moves.
		c.net.partition(n2.host, c.nodes[0].host)
		time.Sleep(2 * time.Second)
		moved := make(chan error, 1)
		go func() {
			_, err := n2.a.out.MigrateOut(peer.MigrateOutRequest{ID: id, To: "n3", Manual: true})
			moved <- err
		}()
		time.Sleep(time.Second)
		c.net.heal()
		if err := <-moved; err != nil {
			t.Fatalf("the slow migration: %v", err)
		}
		if l, ok := n3.a.jobs.LocalRec(id); !ok || l.LeaseCap.IsZero() {
			t.Fatalf("n3's record of the moved job: %v, lease capped at %v; want a cap", ok, l.LeaseCap)
		}
		time.Sleep(time.Second)
		c.net.heal()
		time.Sleep(12 * time.Second) // past fence.kill after the commit
		run, _ := c.world.copies(id)
		if r := c.homeRec(id); len(run) != 1 || run[0] != "n3" || r.Node != "n3" || r.Inc != 0 {
			t.Fatalf("after the slow restore: runs on %v, record on %s inc %d (restarts %+v); want it on n3, never killed", run, r.Node, r.Inc, r.Restarts)
		}
		c.intact()
	})
}

// A home restarted while a restart of its job of a lost node waits to be
// tried again (loss.RetryAfter) tries it again after its start: the job's
// node told it its fence killed the job and forgot it, and nothing else
// would ever bring the job back (its record says it runs on that node,
// which is alive).
func TestAgentsRestartRetriedAfterTheHomeRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, fenced := fencedOnN2Alone(t, 54)
		n1 := c.nodes[0]
		time.Sleep(20 * time.Second) // the home's tries find no node but n2
		c.crash(0)
		time.Sleep(5 * time.Second)
		c.start(0)
		n1 = c.nodes[0]
		c.waitFor("the restarted home sees n3 alive", time.Minute, func() bool { p, ok := n1.a.members.Get("n3"); return ok && p.Alive })
		c.resumeAndRestartOnN3(n1, fenced, "its restarted home restarts it on n3", 2*time.Minute)
		c.intact()
	})
}

// A job whose node is lost while the node that keeps its checkpoint
// merely looks dead too (its home cut off from both) is not marked lost
// at once: its home waits and tries its restart again, as with no live
// node to restart it on, and restarts it once the keeper is back. Marked
// lost, it stayed lost: its node, cut off for good, never told of the
// fenced kill. (Its checkpoint is kept off its home as an older roam
// kept it: keeper.StoreFor keeps it at the home now.)
func TestAgentsRestartWaitsForTheKeeper(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newClusterOf(t, 3, 55, faults{}, "static", parts{keepOn: keptOffHome})
		n1 := c.nodes[0]
		id := c.runKept(10*time.Minute, 15*time.Minute)
		keeper := c.homeRec(id).Newest.StoredOn
		on := map[string]string{"n2": "n3", "n3": "n2"}[keeper]
		if _, err := n1.a.out.MigrateOut(peer.MigrateOutRequest{ID: id, To: on, Manual: true}); err != nil {
			t.Fatalf("move to %s: %v", on, err)
		}
		k, x := c.nodes[nodeOf(keeper)], c.nodes[nodeOf(on)]
		c.waitFor("the job fenced on "+on, time.Minute, func() bool { l, ok := x.a.jobs.LocalRec(id); return ok && l.Checkpointed })
		c.world.mu.Lock()
		c.world.gaps[id] = true
		c.world.mu.Unlock()
		c.net.partition(x.host, n1.host)
		c.net.partition(x.host, k.host)
		c.net.partition(k.host, n1.host)
		c.waitDead(n1.a, on)
		c.waitDead(n1.a, keeper)
		time.Sleep(2 * time.Minute) // the home's sweeps, and its tries past fence.kill+margin
		if r := c.homeRec(id); r.State != job.StateRunning || r.Inc != 0 {
			t.Fatalf("with its keeper %s looking dead: %s on %s, inc %d; want it held for the restart", keeper, r.State, r.Node, r.Inc)
		}
		c.net.mu.Lock()
		delete(c.net.cut, pair(k.host, n1.host)) // the keeper is back; the job's node stays cut off
		c.net.mu.Unlock()
		c.waitFor("its home restarts it, off "+on, 3*time.Minute, func() bool {
			r := c.homeRec(id)
			run, _ := c.world.copies(id)
			return r.Inc == 1 && r.State == job.StateRunning && r.Node != on && len(run) == 1 && run[0] == r.Node
		})
		c.intact()
	})
}

// A job that moved to a node its home had not heard from for a while
// (nothing of that home ran there), cut off at once after the move, is
// not restarted by its home before that node's fence has killed it: the
// moved copy holds its lease from the move (its source's reach of the
// home), and the home counts fence.kill+fence.margin from when it took
// the move's note, not from the node's last news (fence.RestartAt), which
// was older, or none: it restarted the job seconds after the cut, beside
// the copy that ran on until fence.kill.
func TestAgentsNoRestartBeforeAMovedCopysFence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 56, faults{}, "static")
		n1 := c.nodes[0]
		id := c.runKept(5*time.Second, time.Minute)
		time.Sleep(time.Minute) // past fence.kill+margin after the home's start
		on := map[string]string{"n2": "n3"}[c.homeRec(id).Newest.StoredOn]
		if on == "" {
			on = "n2"
		}
		x := c.nodes[nodeOf(on)]
		c.world.mu.Lock()
		c.world.gaps[id] = true
		c.world.mu.Unlock()
		if _, err := n1.a.out.MigrateOut(peer.MigrateOutRequest{ID: id, To: on, Manual: true}); err != nil {
			t.Fatalf("move to %s: %v", on, err)
		}
		cut := time.Now()
		c.cutOff(x)
		c.waitRestartedOff(id, on)
		if f := n1.cfg.Fence; time.Since(cut) < f.Kill {
			t.Errorf("restarted %v after the cut, before fence.kill (%v)", time.Since(cut), f.Kill)
		}
		c.intact()
	})
}

// A job that dies as roam's dump of it fails (CRIU killed while its
// parasite is in the job's tasks: they die of SIGTRAP as they are let go;
// the chaos run's job ended 133 so) is roam's loss, not the job's end: its
// node tells its home so, and the home restarts it from its kept
// checkpoint. Told as a plain exit, the home ended it.
func TestAgentsRestartAJobItsDumpKilled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 57, faults{}, "static")
		fenced, _ := c.fencedPair("n2")
		n2 := c.nodes[1]
		n2.fn.mu.Lock()
		n2.fn.onDump = func(pid int) error {
			c.world.mu.Lock()
			defer c.world.mu.Unlock()
			if p := c.world.procs[pid]; p != nil && p.job == fenced {
				c.world.set(p, gone, "criu died in its dump")
			}
			return errors.New("criu dump: EOF")
		}
		n2.fn.mu.Unlock()
		if _, err := n2.a.out.MigrateOut(peer.MigrateOutRequest{ID: fenced, To: "n3", Manual: true}); err == nil {
			t.Fatal("the migration whose dump failed went through")
		}
		c.waitFor("its home restarts it from its kept checkpoint", 2*time.Minute, func() bool {
			r := c.homeRec(fenced)
			run, _ := c.world.copies(fenced)
			return r.Inc == 1 && r.State == job.StateRunning && len(run) == 1 && run[0] == r.Node
		})
		if r := c.homeRec(fenced); r.ExitCode != nil {
			t.Fatalf("restarted with an exit status %d", *r.ExitCode)
		}
		c.intact()
	})
}

// A job whose node loses its home while CRIU dumps the job (a migration's
// dump here; a periodic checkpoint's in the chaos run) gets no SIGSTOP
// from its fence until the dump ends: a signal then reaches tasks CRIU
// has seized, and the checkpoint taken did not restore on any node
// ("Can't open file ... on restore"), which lost the job its fence then
// killed. Past its dump the fence stops it as it would have.
func TestAgentsFenceLeavesADumpAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 58, faults{}, "static", func(cfg *Config) {
			cfg.Fence.Lease, cfg.Fence.Kill, cfg.Fence.Margin = 4*time.Second, 12*time.Second, 2*time.Second
		})
		n2 := c.nodes[1]
		resp, err := c.nodes[0].a.launch.Run(Caller{}, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 1, On: "n2", CheckpointEvery: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		id := resp.IDs[0]
		c.waitFor("a checkpoint kept off n2, and n2 fencing the job", 3*time.Minute, func() bool {
			r := c.homeRec(id)
			l, ok := n2.a.jobs.LocalRec(id)
			return r.Newest != nil && r.Newest.OK && r.Newest.StoredOn != "n2" && ok && l.Checkpointed
		})
		c.world.mu.Lock()
		c.world.dumpTime = 8 * time.Second
		c.world.mu.Unlock()
		c.net.partition(n2.host, c.nodes[0].host)
		done := make(chan error, 1)
		go func() {
			_, err := n2.a.out.MigrateOut(peer.MigrateOutRequest{ID: id, To: "n3", Manual: true})
			done <- err
		}()
		time.Sleep(6 * time.Second) // past fence.lease, in the dump
		if n := c.stops(1); n != 0 {
			t.Fatalf("n2's fence sent %d SIGSTOPs to the job while CRIU dumped it", n)
		}
		c.net.heal()
		<-done
		c.intact()
	})
}

// fencedOnN2Alone starts, on a cluster of 3 nodes (seed), a job its home
// n1 could restart on n2, drains n1 and n3 at the home, and cuts the home
// off itself until n2's fence has killed the job; once the link is back,
// it waits until n2 has told the home so and forgotten the job. n2 is
// then the one node the home could restart it on, and n2's consent
// refuses that.
func fencedOnN2Alone(t *testing.T, seed int64) (*cluster, string) {
	c := newCluster(t, 3, seed, faults{}, "static")
	n1, n2 := c.nodes[0], c.nodes[1]
	fenced, _ := c.fencedPair("n2")
	for _, n := range []string{"n1", "n3"} {
		if err := n1.a.drain.Ask(Caller{}, n, peer.DrainOn); err != nil {
			t.Fatalf("drain %s: %v", n, err)
		}
	}
	c.waitFor("n1 sees n3 draining", time.Minute, func() bool { p, ok := n1.a.members.Get("n3"); return ok && p.Draining })
	c.cutOff(n1)
	c.waitFor("n2 kills the job by its fence", time.Minute, func() bool { run, fz := c.world.copies(fenced); return len(run)+len(fz) == 0 })
	c.net.heal()
	c.waitFor("n2 tells the home its fence killed it, and forgets it", time.Minute, func() bool { _, ok := n2.a.jobs.LocalRec(fenced); return !ok })
	return c, fenced
}

// runKept starts a job on n1 checkpointed every every and waits, up to
// within, until its home records a checkpoint kept on a node.
func (c *cluster) runKept(every, within time.Duration) string {
	c.t.Helper()
	resp, err := c.nodes[0].a.launch.Run(Caller{}, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 1, On: "n1", CheckpointEvery: every})
	if err != nil {
		c.t.Fatal(err)
	}
	id := resp.IDs[0]
	c.waitFor("a checkpoint kept", within, func() bool {
		r := c.homeRec(id)
		return r.Newest != nil && r.Newest.OK && r.Newest.StoredOn != ""
	})
	return id
}

// cutOff partitions node x from every other node.
func (c *cluster) cutOff(x *hnode) {
	for _, n := range c.nodes {
		if n != x {
			c.net.partition(x.host, n.host)
		}
	}
}

// waitRestartedOff waits until job id's home has restarted it off node
// on: one copy running, where its record says.
func (c *cluster) waitRestartedOff(id, on string) {
	c.t.Helper()
	c.waitFor("its home restarts it off "+on, 3*time.Minute, func() bool {
		r := c.homeRec(id)
		run, _ := c.world.copies(id)
		return r.Inc >= 1 && r.State == job.StateRunning && r.Node != on && len(run) == 1 && run[0] == r.Node
	})
}

// keptOffHome is where an older roam kept a job's periodic checkpoint:
// at its home while it ran elsewhere, else on another live node by a
// hash of its id.
func keptOffHome(id, running, home string, live []string) string {
	if home != running && slices.Contains(live, home) {
		return home
	}
	others := slices.DeleteFunc(slices.Clone(live), func(n string) bool { return n == running })
	if len(others) == 0 {
		return ""
	}
	slices.Sort(others)
	h := fnv.New32a()
	h.Write([]byte(id))
	return others[h.Sum32()%uint32(len(others))]
}

// A job that moves onto a node that keeps its checkpoint, and is cut off
// there, is restarted by its home all the same: kept where an older roam
// kept it (a node other than the home, for a job at its home), the one
// checkpoint was on the cut-off node with the job, its fence killed the
// job, and its home had nothing to restart it from (the chaos run, seed
// 74135614 step 714: lost). Its home keeps it now (keeper.StoreFor).
func TestAgentsRestartAJobCutOffWhereItsCheckpointWas(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 57, faults{}, "static")
		n1 := c.nodes[0]
		id := c.runKept(5*time.Second, time.Minute)
		keeper := c.homeRec(id).Newest.StoredOn
		on := keeper
		if on == "n1" {
			on = "n2" // kept at its home: any node
		}
		c.world.mu.Lock()
		c.world.gaps[id] = true
		c.world.mu.Unlock()
		if _, err := n1.a.out.MigrateOut(peer.MigrateOutRequest{ID: id, To: on, Manual: true}); err != nil {
			t.Fatalf("move to %s: %v", on, err)
		}
		x := c.nodes[nodeOf(on)]
		c.waitFor("the job fenced on "+on, time.Minute, func() bool { l, ok := x.a.jobs.LocalRec(id); return ok && l.Checkpointed })
		c.cutOff(x)
		c.waitRestartedOff(id, on)
		if r := c.homeRec(id); r.Inc != 1 {
			t.Errorf("restarted %d times, want once", r.Inc)
		}
		if keeper != "n1" {
			t.Errorf("its checkpoint was kept on %s, not its home", keeper)
		}
		c.intact()
	})
}

// resumeAndRestartOnN3 lets the home (node home) place on n3 again and
// waits, up to within, until it has restarted job id there once: one
// copy running, on n3.
func (c *cluster) resumeAndRestartOnN3(home *hnode, id, what string, within time.Duration) {
	c.t.Helper()
	if err := home.a.drain.Ask(Caller{}, "n3", peer.DrainOff); err != nil {
		c.t.Fatalf("resume n3: %v", err)
	}
	c.waitFor(what, within, func() bool {
		r := c.homeRec(id)
		run, _ := c.world.copies(id)
		return r.Inc == 1 && r.State == job.StateRunning && r.Node == "n3" && len(run) == 1 && run[0] == "n3"
	})
}
