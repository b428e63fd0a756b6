package agent

import (
	"bytes"
	"slices"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/job"
)

// fencedPair starts, from node 0 on node on, a job with periodic
// checkpoints (its home could restart it: fenced) and one without
// (free), and waits until the first's checkpoint is kept off that node.
// The world lets the fenced one have no copy between its fence's kill
// and its restart.
func (c *cluster) fencedPair(on string) (fenced, free string) {
	c.t.Helper()
	resp, err := c.nodes[0].a.launch.Run(Caller{}, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 1, On: on, CheckpointEvery: 5 * time.Second})
	if err != nil {
		c.t.Fatal(err)
	}
	fenced, free = resp.IDs[0], c.run(0, 1, on)[0]
	c.say(nodeOf(on), fenced, fenced+" before")
	c.waitFor("a checkpoint kept off "+on, time.Minute, func() bool {
		r := c.homeRec(fenced)
		return r.Newest != nil && r.Newest.OK && r.Newest.StoredOn != on && r.Newest.StoredOn != "" && c.homeOutput(fenced) == fenced+" before\n"
	})
	c.world.mu.Lock()
	c.world.gaps[fenced] = true
	c.world.mu.Unlock()
	return fenced, free
}

// nodeOf is the index of node name ("n2": 1).
func nodeOf(name string) int { return int(name[1] - '1') }

// stops counts the SIGSTOPs node i's agent (this incarnation) sent.
func (c *cluster) stops(i int) int {
	fn := c.nodes[i].fn
	fn.mu.Lock()
	defer fn.mu.Unlock()
	return len(slices.DeleteFunc(slices.Clone(fn.signals), func(s sentSignal) bool { return s.sig != syscall.SIGSTOP }))
}

// intact fails the test if the world saw two copies of a job run at once.
func (c *cluster) intact() {
	c.t.Helper()
	c.world.mu.Lock()
	broken := slices.Clone(c.world.broken)
	c.world.mu.Unlock()
	if len(broken) > 0 {
		c.t.Fatalf("the invariant broke %d times; first: %s", len(broken), broken[0])
	}
}

// A node cut off from the others stops the job its home could restart
// after fence.lease, kills it at fence.kill, and its home restarts it
// elsewhere only after that, from its checkpoint, within a minute of the
// cut: never two running copies (the world checks every change of every
// copy, the cut-off node's included). The job without a checkpoint runs
// on through the cut, never stopped, and is running again at its home
// once the link is back, its output complete. The old copy's news is
// refused then, and nothing it wrote reaches the home.
func TestAgentsFenceACutNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 45, faults{}, "static")
		n2, f := c.nodes[1], c.nodes[0].cfg.Fence
		fenced, free := c.fencedPair("n2")
		cut := time.Now()
		c.net.partition(n2.host, c.nodes[0].host)
		c.net.partition(n2.host, c.nodes[2].host)
		c.waitFor("n2 stops the job its home could restart", time.Minute, func() bool { _, fz := c.world.copies(fenced); return len(fz) == 1 && c.stops(1) == 1 })
		stopped := time.Since(cut)
		c.waitFor("n2 kills it", time.Minute, func() bool { run, fz := c.world.copies(fenced); return len(run)+len(fz) == 0 })
		killed := time.Since(cut)
		c.waitFor("its home restarts it elsewhere", time.Minute, func() bool {
			r := c.homeRec(fenced)
			run, _ := c.world.copies(fenced)
			return r.Inc == 1 && r.State == job.StateRunning && r.Node != "n2" && len(run) == 1 && run[0] == r.Node
		})
		restarted := time.Since(cut)
		t.Logf("after the cut: stopped %v, killed %v, restarted %v", stopped, killed, restarted)
		// The last push renewed the lease up to a heartbeat before the cut.
		hb := f.HeartbeatEvery() + time.Second
		switch {
		case stopped < f.Lease-hb || stopped > f.Lease+time.Second:
			t.Fatalf("stopped %v after the cut; lease %v", stopped, f.Lease)
		case killed < f.Kill-hb || killed > f.Kill+time.Second:
			t.Fatalf("killed %v after the cut; kill %v", killed, f.Kill)
		case restarted < f.Kill+f.Margin-hb || restarted > time.Minute:
			t.Fatalf("restarted %v after the cut; kill+margin %v, and the bound is a minute", restarted, f.Kill+f.Margin)
		}
		r := c.homeRec(fenced)
		if len(r.Restarts) != 1 || !strings.Contains(r.Restarts[0].Why, "n2 was declared dead") || c.homeOutput(fenced) != fenced+" before\n" {
			t.Fatalf("restarts %+v, home output %q", r.Restarts, c.homeOutput(fenced))
		}
		// The job with no checkpoint: lost at its home, running on n2.
		if run, fz := c.world.copies(free); len(run) != 1 || run[0] != "n2" || len(fz) != 0 || c.stops(1) != 1 || c.homeRec(free).State != job.StateLost {
			t.Fatalf("the free job runs on %v, frozen on %v, record %s; %d stops on n2", run, fz, c.homeRec(free).State, c.stops(1))
		}
		c.say(1, free, free+" during")
		c.net.heal()
		c.waitFor("the free job running again, its output in, the old copy forgotten", 2*time.Minute, func() bool {
			r := c.homeRec(free)
			_, old := n2.a.jobs.LocalRec(fenced)
			return r.State == job.StateRunning && r.Node == "n2" && strings.HasSuffix(c.homeOutput(free), free+" during\n") && !old
		})
		if r := c.homeRec(fenced); r.Inc != 1 || r.Node == "n2" || c.homeOutput(fenced) != fenced+" before\n" {
			t.Fatalf("after the heal: %s on %s inc %d, output %q", r.State, r.Node, r.Inc, c.homeOutput(fenced))
		}
		c.intact()
	})
}

// A node whose agent stalls (a thrashing node: it does nothing, answers
// nobody, and its jobs run on) past fence.kill, and is still cut off
// when it wakes: it kills the job its home could restart at once, before
// its home may restart it, from the reach it kept in its state directory
// (its lease does not start again with the agent). When its link comes
// back before its home's wait ends, it tells the home its fence killed
// the job, and the home restarts it from its checkpoint then rather than
// take its end. A stall past kill+margin is not covered (package
// fence): the home's wait is what bounds it.
func TestAgentsFenceAStalledAgent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 46, faults{}, "static")
		n2, f := c.nodes[1], c.nodes[0].cfg.Fence
		fenced, free := c.fencedPair("n2")
		c.crash(1)
		stall := time.Now()
		c.net.partition(n2.host, c.nodes[0].host)
		c.net.partition(n2.host, c.nodes[2].host)
		time.Sleep(f.Kill + time.Second)
		c.start(1)
		c.waitFor("n2 kills the job as it wakes", 5*time.Second, func() bool { run, fz := c.world.copies(fenced); return len(run)+len(fz) == 0 })
		killed := time.Since(stall)
		c.net.heal()
		c.waitFor("its home restarts it", time.Minute, func() bool {
			r := c.homeRec(fenced)
			run, _ := c.world.copies(fenced)
			return r.Inc == 1 && r.State == job.StateRunning && len(run) == 1 && run[0] == r.Node
		})
		r := c.homeRec(fenced)
		t.Logf("after the stall's start: killed %v, restarted %v on %s: %s", killed, time.Since(stall), r.Node, r.Restarts[0].Why)
		if time.Since(stall) >= f.Kill+f.Margin || !strings.Contains(r.Restarts[0].Why, "fence.kill") {
			t.Fatalf("restarted %v after the stall began, because %q: want the fenced kill's restart, before kill+margin", time.Since(stall), r.Restarts[0].Why)
		}
		if run, _ := c.world.copies(free); len(run) != 1 || run[0] != "n2" || c.stops(1) != 0 {
			t.Fatalf("the free job runs on %v; %d stops on n2", run, c.stops(1))
		}
		c.intact()
	})
}

// A restart of a job's home (an upgrade: a few seconds) fences nothing:
// fence.lease is longer than that.
func TestAgentsFenceNothingThroughAHomeRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 47, faults{}, "static")
		fenced, _ := c.fencedPair("n2")
		c.crash(0)
		time.Sleep(5 * time.Second)
		c.start(0)
		time.Sleep(c.nodes[0].cfg.Fence.Kill)
		if run, fz := c.world.copies(fenced); len(run) != 1 || run[0] != "n2" || len(fz) != 0 || c.stops(1) != 0 {
			t.Fatalf("runs on %v, frozen on %v, %d stops on n2", run, fz, c.stops(1))
		}
		c.intact()
	})
}

// A link that comes back between fence.lease and fence.kill costs the job
// a pause: its node thaws it as its home answers again, it runs on there,
// and nothing restarts it.
func TestAgentsFenceThawsWhenTheHomeAnswers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 48, faults{}, "static")
		n2, f := c.nodes[1], c.nodes[0].cfg.Fence
		fenced, _ := c.fencedPair("n2")
		cut := time.Now()
		c.net.partition(n2.host, c.nodes[0].host)
		c.net.partition(n2.host, c.nodes[2].host)
		c.waitFor("n2 stops the job", time.Minute, func() bool { _, fz := c.world.copies(fenced); return len(fz) == 1 && c.stops(1) == 1 })
		stopped := time.Since(cut)
		c.net.heal()
		c.waitFor("n2 thaws it", f.Kill, func() bool { run, _ := c.world.copies(fenced); return len(run) == 1 && run[0] == "n2" })
		thawed := time.Since(cut)
		time.Sleep(f.Kill + f.Margin)
		r := c.homeRec(fenced)
		if run, fz := c.world.copies(fenced); len(run) != 1 || run[0] != "n2" || len(fz) != 0 || r.Inc != 0 || len(r.Restarts) != 0 || r.State != job.StateRunning || r.Node != "n2" {
			t.Fatalf("after the thaw at %v: runs on %v, frozen on %v; record %s on %s inc %d, restarts %v", thawed, run, fz, r.State, r.Node, r.Inc, r.Restarts)
		}
		t.Logf("stopped %v, thawed %v after the cut", stopped, thawed)
		if stopped < f.Lease-f.HeartbeatEvery()-time.Second {
			t.Fatalf("stopped %v after the cut: before the lease", stopped)
		}
		c.intact()
	})
}

// A job moved while its home (with n4) is cut off from both its source
// and its destination keeps its source's lease: the destination counts from when
// the source last reached the home, not from its own reach or the job's
// arrival, and kills it before the home, which counts from the source's
// last news, restarts it elsewhere (migrate.Header.LeaseAge). The lease
// here is longer than by default so that the move comes after half of
// it: counted from its arrival, the moved copy would run past the
// restart.
func TestAgentsFenceAJobMovedWhileCutOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 4, 46, faults{}, "static", func(cfg *Config) {
			cfg.Fence.Lease, cfg.Fence.Kill, cfg.Fence.Margin = 30*time.Second, 40*time.Second, 10*time.Second
		})
		n2, n3 := c.nodes[1], c.nodes[2]
		fenced, _ := c.fencedPair("n2")
		cut := time.Now()
		for _, h := range []string{c.nodes[0].host, c.nodes[3].host} {
			c.net.partition(n2.host, h)
			c.net.partition(n3.host, h)
		}
		time.Sleep(20 * time.Second)
		if _, err := n2.a.out.MigrateOut(peer.MigrateOutRequest{ID: fenced, To: "n3", Manual: true}); err != nil {
			t.Fatalf("move to n3, cut off from the home: %v", err)
		}
		if run, _ := c.world.copies(fenced); len(run) != 1 || run[0] != "n3" {
			t.Fatalf("after the move the job runs on %v", run)
		}
		if l, ok := n3.a.jobs.LocalRec(fenced); !ok || l.LeaseCap.IsZero() || l.LeaseCap.After(cut) {
			t.Fatalf("n3's record of the moved job: lease capped at %v, the cut at %v", l.LeaseCap, cut)
		}
		c.waitFor("n3 kills it", time.Minute, func() bool { run, fz := c.world.copies(fenced); return len(run)+len(fz) == 0 })
		killed := time.Since(cut)
		c.waitFor("its home restarts it elsewhere", time.Minute, func() bool {
			r := c.homeRec(fenced)
			run, _ := c.world.copies(fenced)
			return r.Inc == 1 && r.State == job.StateRunning && len(run) == 1 && run[0] == r.Node
		})
		t.Logf("after the cut: moved at 20s, killed on n3 at %v, restarted after %v", killed, time.Since(cut))
		if killed > 40*time.Second+time.Second {
			t.Fatalf("n3 killed the moved job %v after the cut; its source's lease ended by 40s", killed)
		}
		c.intact()
	})
}

// A job without periodic checkpoints whose owner holds a checkpoint file
// of it is fenced on its node as one with them is: cut off, its node
// stops it at fence.lease and kills it at fence.kill, and its home
// refuses the owner's `roam restart` of the file while the lost node may
// still run it (until fence.kill + fence.margin after it last heard from
// it), then takes it: the restarted copy never runs beside the old one.
func TestAgentsFenceAJobItsOwnerCheckpointed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 47, faults{}, "static")
		owner := Caller{UID: 70001, GID: 70001}
		id := runOneOn(t, c, owner, "n2")
		file := checkpointOf(t, c, owner, id)
		c.waitFor("n2 marks the job checkpointed", time.Minute, func() bool { l, ok := c.nodes[1].a.jobs.LocalRec(id); return ok && l.Checkpointed })
		c.world.mu.Lock()
		c.world.gaps[id] = true
		c.world.mu.Unlock()
		cut := time.Now()
		c.net.partition(c.nodes[1].host, c.nodes[0].host)
		c.net.partition(c.nodes[1].host, c.nodes[2].host)
		c.waitFor("its home takes it for lost", time.Minute, func() bool { return c.homeRec(id).State == job.StateLost })
		if _, _, err := restart(c, owner, bytes.NewReader(file), int64(len(file))); err == nil || !strings.Contains(err.Error(), "which may still run it until") {
			t.Fatalf("a restart while n2 may still run it, %v after the cut: %v", time.Since(cut), err)
		}
		c.waitFor("n2 kills it by its fence", time.Minute, func() bool { run, fz := c.world.copies(id); return len(run)+len(fz) == 0 })
		killed := time.Since(cut)
		var res api.RestartResponse
		c.waitFor("the owner's restart is taken", time.Minute, func() bool {
			var err error
			res, _, err = restart(c, owner, bytes.NewReader(file), int64(len(file)))
			if err != nil {
				time.Sleep(time.Second)
			}
			return err == nil
		})
		restarted := time.Since(cut)
		t.Logf("after the cut: killed on n2 at %v, restart taken at %v on %s", killed, restarted, res.Node)
		if f := c.nodes[0].cfg.Fence; killed > f.Kill+time.Second || restarted < f.Kill {
			t.Fatalf("killed %v, restarted %v after the cut; kill %v", killed, restarted, f.Kill)
		}
		c.waitFor("the restarted copy runs", time.Minute, func() bool { run, _ := c.world.copies(id); return len(run) == 1 && run[0] != "n2" })
		c.intact()
	})
}

// A node whose fence.kill is longer than its home's (configured apart)
// says so in its metadata, and its home waits for that kill, not its
// own, before it restarts the node's job: never two copies.
func TestAgentsFenceANodeWithALongerKill(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 48, faults{}, "static", func(cfg *Config) {
			if cfg.NodeID == "n2" {
				cfg.Fence.Kill = 80 * time.Second
			}
		})
		n2 := c.nodes[1]
		c.waitFor("the home knows n2's kill", time.Minute, func() bool { return c.nodes[0].a.members.FenceKill("n2") == 80*time.Second })
		fenced, _ := c.fencedPair("n2")
		cut := time.Now()
		c.net.partition(n2.host, c.nodes[0].host)
		c.net.partition(n2.host, c.nodes[2].host)
		c.waitFor("n2 kills it", 2*time.Minute, func() bool { run, fz := c.world.copies(fenced); return len(run)+len(fz) == 0 })
		killed := time.Since(cut)
		c.waitFor("its home restarts it elsewhere", time.Minute, func() bool {
			r := c.homeRec(fenced)
			run, _ := c.world.copies(fenced)
			return r.Inc == 1 && r.State == job.StateRunning && len(run) == 1 && run[0] == r.Node
		})
		restarted := time.Since(cut)
		t.Logf("after the cut: killed on n2 at %v, restarted at %v", killed, restarted)
		if restarted < killed {
			t.Fatalf("restarted %v after the cut, before n2 killed it at %v", restarted, killed)
		}
		c.intact()
	})
}

// A job that asks for periodic checkpoints but has none kept yet holds no
// lease: its home has nothing to restart it from, so a fence that killed
// it lost it (the chaos run saw it). Cut off past fence.kill, it runs on,
// never stopped, lost at its home, and running again there once the link
// is back.
func TestAgentsFenceNoJobWithoutAKeptCheckpoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 49, faults{}, "static")
		n2, f := c.nodes[1], c.nodes[0].cfg.Fence
		resp, err := c.nodes[0].a.launch.Run(Caller{}, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 1, On: "n2", CheckpointEvery: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		id := resp.IDs[0]
		c.say(1, id, "before")
		c.waitFor("output home", time.Minute, func() bool { return c.homeOutput(id) == "before\n" })
		c.net.partition(n2.host, c.nodes[0].host)
		c.net.partition(n2.host, c.nodes[2].host)
		time.Sleep(f.Kill + f.Margin + 10*time.Second)
		if run, fz := c.world.copies(id); len(run) != 1 || run[0] != "n2" || len(fz) != 0 || c.stops(1) != 0 {
			t.Fatalf("past fence.kill the job runs on %v, frozen on %v; %d stops on n2", run, fz, c.stops(1))
		}
		c.net.heal()
		c.waitFor("running again at its home", 2*time.Minute, func() bool {
			r := c.homeRec(id)
			return r.State == job.StateRunning && r.Node == "n2" && r.Inc == 0
		})
		c.intact()
	})
}
