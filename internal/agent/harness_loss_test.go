package agent

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/agent/jobtable"
	"roam/internal/agent/loss"
	"roam/internal/agent/peer"
	"roam/internal/agent/relay"
	"roam/internal/api"
	"roam/internal/job"

	"github.com/hashicorp/memberlist"
)

// homeRec is job id's record at its home (a zero record when it has none).
func (c *cluster) homeRec(id string) job.Record {
	r, _ := c.nodes[nodeIndex(id)].a.jobs.HomeRecord(id)
	return r
}

// waitDead waits until node a takes node for dead, and returns when
// membership changed its mind about it.
func (c *cluster) waitDead(a *Agent, node string) time.Time {
	c.t.Helper()
	var dead time.Time
	c.waitFor(a.cfg.NodeID+" declares "+node+" dead", time.Minute, func() bool {
		if p, ok := a.members.Get(node); ok && !p.Alive {
			dead = p.Since
			return true
		}
		return false
	})
	return dead
}

// say appends a line to the output of job id running on node i, as the
// program would.
func (c *cluster) say(i int, id, line string) {
	c.t.Helper()
	f, err := os.OpenFile(filepath.Join(c.nodes[i].fn.SpoolDir(id), "stdout"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line + "\n"); err != nil {
		c.t.Fatal(err)
	}
}

// homeOutput is what job id's home has of its stdout.
func (c *cluster) homeOutput(id string) string {
	b, _ := os.ReadFile(filepath.Join(c.nodes[nodeIndex(id)].a.spools.Dir(id), "stdout"))
	return string(b)
}

// A node cut off from the others is declared dead; its jobs are lost at
// their home as soon as it is, not later, and an attached reader is told
// so. The node still runs them: when its link comes back they are running
// again at the home, their output complete, in order and once, and their
// exit status arrives once.
func TestAgentsJobsLostAndBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 11, faults{}, "static")
		home, n2 := c.nodes[0].a, c.nodes[1]
		ids := c.run(0, 2, "n2")
		for _, id := range ids {
			c.say(1, id, id+" before")
		}
		c.waitFor("output home", time.Minute, func() bool {
			for _, id := range ids {
				if c.homeOutput(id) != id+" before\n" {
					return false
				}
			}
			return true
		})

		cut := time.Now()
		c.net.partition(n2.host, c.nodes[0].host)
		c.net.partition(n2.host, c.nodes[2].host)
		dead := c.waitDead(home, "n2")
		c.waitFor("the jobs lost", time.Minute, func() bool {
			for _, id := range ids {
				if c.homeRec(id).State != job.StateLost {
					return false
				}
			}
			return true
		})
		detect := dead.Sub(cut)
		for _, id := range ids {
			r := c.homeRec(id)
			if r.Node != "n2" || r.LostAt.Sub(cut) > 2*detect {
				t.Fatalf("%s: lost on %q at %v after the cut; failure detection took %v", id, r.Node, r.LostAt.Sub(cut), detect)
			}
		}
		// A reader of its output, as an attached roam run is, is told.
		o, err := home.news.Output(ids[0], int64(len(ids[0])+len(" before\n")), 0, 5*time.Second)
		if err != nil || !o.Ended || o.State != job.StateLost || o.Node != "n2" || o.LostAt.IsZero() || o.ExitCode != nil {
			t.Fatalf("the reader was told %+v (%v), want lost on n2", o, err)
		}
		t.Logf("failure detection %v; lost %v after the cut", detect, c.homeRec(ids[0]).LostAt.Sub(cut))

		// Still running there, and still writing.
		if run, _ := c.world.copies(ids[0]); len(run) != 1 || run[0] != "n2" {
			t.Fatalf("the lost job runs on %v", run)
		}
		for _, id := range ids {
			c.say(1, id, id+" during")
		}
		time.Sleep(20 * time.Second)
		c.net.heal()
		c.waitFor("the jobs running again, their output complete", 2*time.Minute, func() bool {
			for _, id := range ids {
				r := c.homeRec(id)
				if r.State != job.StateRunning || r.Node != "n2" || !r.LostAt.IsZero() || c.homeOutput(id) != id+" before\n"+id+" during\n" {
					return false
				}
			}
			return true
		})
		// They end there; each exit status arrives once.
		for _, id := range ids {
			c.say(1, id, id+" after")
			rec, _ := n2.a.jobs.LocalRec(id)
			pid := rec.PID
			if err := n2.fn.Signal(pid, syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}
		c.waitFor("both finished", time.Minute, func() bool {
			for _, id := range ids {
				if c.homeRec(id).State != job.StateFinished {
					return false
				}
			}
			return true
		})
		for _, id := range ids {
			r := c.homeRec(id)
			want := id + " before\n" + id + " during\n" + id + " after\n"
			if r.ExitCode == nil || *r.ExitCode != 128+int(syscall.SIGTERM) || c.homeOutput(id) != want {
				t.Fatalf("%s: exit %v, output %q; want 143 and %q", id, r.ExitCode, c.homeOutput(id), want)
			}
		}
		var kinds []string
		for _, e := range home.events.Since(cut) {
			kinds = append(kinds, e.Kind+" "+e.Job)
		}
		for _, id := range ids {
			if strings.Count(strings.Join(kinds, ","), "lost "+id) != 1 || strings.Count(strings.Join(kinds, ","), "back "+id) != 1 {
				t.Fatalf("events %v: want one lost and one back for %s", kinds, id)
			}
		}
	})
}

// A job whose home has no record of it (its run failed to start on
// another node, and the home took the run back while this node's answer
// was lost) is ended by its node at its next heartbeat: nothing of a
// failed run is left running unseen.
func TestAgentsEndJobsTheirHomeForgot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 12, faults{}, "static")
		home, n2 := c.nodes[0].a, c.nodes[1].a
		id := fmt.Sprintf("n1.%d", 999)
		req := peer.StartRequest{Home: "n1", HomeAddr: home.peers.SelfAddr, Jobs: []job.Spec{{ID: id, Argv: []string{"/bin/true"}, Cwd: "/"}}}
		var res []peer.StartResult
		if err := home.peers.Call("n2", "POST", "/v1/peer/start", req, &res); err != nil || len(res) != 1 || res[0].Error != "" {
			t.Fatalf("start: %+v %v", res, err)
		}
		// It started (its pid is in the answer); it may already be ending,
		// as the start kicks the push loop at once.
		start := time.Now()
		c.waitFor("the orphan ended", time.Minute, func() bool {
			run, _ := c.world.copies(id)
			_, here := n2.jobs.LocalRec(id)
			return len(run) == 0 && !here
		})
		if d := time.Since(start); d > jobtable.AliveEvery+time.Second {
			t.Fatalf("the orphan ran %v, past the heartbeat (%v)", d, jobtable.AliveEvery)
		}
	})
}

// A home that was down while the node of its job died never hears that
// node leave (membership does not report a death it did not see): its
// periodic sweep marks the job lost all the same, once the restarted home
// has had the time to hear of every live node.
func TestAgentsHomeBackAfterNodeDied(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 13, faults{}, "static")
		id := c.run(0, 1, "n2")[0]
		c.waitFor("running on n2", time.Minute, func() bool { return c.homeRec(id).State == job.StateRunning })
		c.crash(0)
		c.crash(1)
		time.Sleep(30 * time.Second)
		c.start(0)
		back := time.Now()
		c.waitFor("the job lost", 2*time.Minute, func() bool { return c.homeRec(id).State == job.StateLost })
		if d := time.Since(back); d > loss.Grace+jobtable.AliveEvery+time.Second {
			t.Fatalf("lost %v after the home came back, past %v", d, loss.Grace+jobtable.AliveEvery)
		}
		if r := c.homeRec(id); r.Node != "n2" {
			t.Fatalf("lost on %q", r.Node)
		}
	})
}

// A node membership has declared dead whose updates still arrive (after a
// healed link, a node's pushes over the peer port reach the home before
// membership there has seen it alive again: it took seconds on the loaded
// 2-core machine) keeps its jobs: they are lost at most once, when the
// node is declared dead, and back at its next update, not lost again at
// every sweep until membership catches up. Membership's leave event is
// delivered here by hand, as memberlist delivers it, with gossip intact,
// so that it stays unrevised for as long as the test needs.
func TestAgentsNodeDeadInGossipButPushing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 14, faults{}, "static")
		home := c.nodes[0].a
		ids := c.run(0, 2, "n2")
		c.waitFor("running on n2", time.Minute, func() bool {
			for _, id := range ids {
				if c.homeRec(id).State != job.StateRunning {
					return false
				}
			}
			return true
		})
		declared := time.Now().Add(-time.Nanosecond) // the events come at this same instant
		var n2 *memberlist.Node
		for _, m := range home.gossip.Memberlist().Members() {
			if m.Name == "n2" {
				n2 = m
			}
		}
		if n2 == nil {
			t.Fatal("n1's membership does not list n2")
		}
		home.gossip.NotifyLeave(n2)
		// Eight sweeps with membership saying dead and n2 pushing.
		time.Sleep(8 * jobtable.AliveEvery)
		stillDead := !home.members.Alive("n2")
		if !stillDead {
			t.Fatal("membership took n2 for alive again; the test shows nothing")
		}
		for _, id := range ids {
			if r := c.homeRec(id); r.State != job.StateRunning || r.Node != "n2" {
				t.Fatalf("%s is %s on %q while n2 pushes its updates", id, r.State, r.Node)
			}
		}
		var kinds []string
		for _, e := range home.events.Since(declared) {
			kinds = append(kinds, e.Kind+" "+e.Job)
		}
		all := strings.Join(kinds, ",")
		for _, id := range ids {
			lost, back := strings.Count(all, "lost "+id), strings.Count(all, "back "+id)
			if lost > 1 || back != lost {
				t.Fatalf("events %v: %s lost %d times and back %d; want once each at most", kinds, id, lost, back)
			}
		}
		if run, _ := c.world.copies(ids[0]); len(run) != 1 || run[0] != "n2" {
			t.Fatalf("the job runs on %v", run)
		}
		t.Logf("events while n2 was dead to n1's membership: %v", kinds)
	})
}

// News a copy sent before the job moved on, delivered after (a request
// that stalled for seconds), must not say where the job runs: with the
// job lost at its home, it brought the job "back" on its old node, and
// the home never again heard from where it really ran (seed 417901658 of
// TestAgentsMigrateUnderFaults). News of a copy that moved later than the
// home knows says where it runs.
func TestAgentsStaleNewsDoesNotMoveAJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 35, faults{}, "static")
		home := c.nodes[0].a
		id := c.run(0, 1, "n2")[0]
		c.waitFor("running on n2", time.Minute, func() bool { return c.homeRec(id).Node == "n2" })
		if m, err := home.out.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: "n3"}); err != nil || !m.OK {
			t.Fatalf("migrate: %+v %v", m, err)
		}
		c.waitFor("the home's record at n3", time.Minute, func() bool {
			r := c.homeRec(id)
			return r.Node == "n3" && r.Migrations == 1
		})
		// Nothing in flight: n3's own next push, which brings the job
		// back from lost, waits for fake time, which stands still until
		// the checks below are done.
		synctest.Wait()
		if _, lost, err := home.jobs.MarkLostOn(id, "n3", time.Now()); !lost || err != nil {
			t.Fatalf("the home marked its job running on n3 lost: %v %v", lost, err)
		}

		moves := func(n int) *int { return &n }
		stale := relay.Update{ID: id, Node: "n2", OutOff: 0, ErrOff: 0, Moves: moves(0)}
		if _, err := home.news.TakeUpdates([]relay.Update{stale}); err != nil {
			t.Fatal(err)
		}
		if r := c.homeRec(id); r.State != job.StateLost || r.Node != "n3" {
			t.Fatalf("after news of the copy that moved on: %s on %q, want lost on n3", r.State, r.Node)
		}
		fresh := relay.Update{ID: id, Node: "n3", OutOff: 0, ErrOff: 0, Moves: moves(1)}
		if _, err := home.news.TakeUpdates([]relay.Update{fresh}); err != nil {
			t.Fatal(err)
		}
		if r := c.homeRec(id); r.State != job.StateRunning || r.Node != "n3" {
			t.Fatalf("after news of the copy on n3: %s on %q, want running on n3", r.State, r.Node)
		}
		// A move the home has no note of: the copy's news says where,
		// and brings back a job lost meanwhile.
		if _, lost, err := home.jobs.MarkLostOn(id, "n3", time.Now()); !lost || err != nil {
			t.Fatalf("the home marked its job running on n3 lost again: %v %v", lost, err)
		}
		newer := relay.Update{ID: id, Node: "n1", OutOff: 0, ErrOff: 0, Moves: moves(2)}
		if _, err := home.news.TakeUpdates([]relay.Update{newer}); err != nil {
			t.Fatal(err)
		}
		if r := c.homeRec(id); r.Node != "n1" || r.Migrations != 2 || r.State != job.StateRunning {
			t.Fatalf("after news of a later move: %s on %q after %d moves, want running on n1 after 2", r.State, r.Node, r.Migrations)
		}
		// An older agent's news, without its copy's moves, is not judged.
		old := relay.Update{ID: id, Node: "n1", OutOff: 0, ErrOff: 0}
		if _, err := home.news.TakeUpdates([]relay.Update{old}); err != nil {
			t.Fatal(err)
		}
		if r := c.homeRec(id); r.Node != "n1" || r.Migrations != 2 {
			t.Fatalf("after an older agent's news: on %q after %d moves", r.Node, r.Migrations)
		}
	})
}
