package agent

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/job"
)

// roam node drain on the harness: the drained node's jobs leave for the
// other nodes (a job placed by hand too), a job pinned with roam run --pin
// stays; nothing is placed or moved there, and roam nodes says it drains,
// on every node; the state outlives a restart of its agent; roam node
// resume lets placement use it again. Only root may drain.
func TestAgentsDrainANode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 29, faults{}, "static")
		a1 := c.nodes[0].a
		user := Caller{UID: 1001, GID: 1001}
		r, err := a1.launch.Run(user, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 7, On: "n2"})
		if err != nil {
			t.Fatal(err)
		}
		pinned, err := a1.launch.Run(user, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 1, On: "n2", Pin: true})
		if err != nil {
			t.Fatal(err)
		}
		ids := append(r.IDs, pinned.IDs[0])
		c.waitFor("8 jobs running on n2", time.Minute, func() bool {
			for _, id := range ids {
				if rec := c.homeRec(id); rec.State != job.StateRunning || rec.Node != "n2" {
					return false
				}
			}
			return true
		})
		// One of them placed there by hand: a drain moves it all the same.
		if m, err := a1.out.Migrate(Caller{}, api.MigrateRequest{ID: ids[0], Node: "n3"}); err != nil || !m.OK {
			t.Fatalf("migrate: %+v %v", m, err)
		}
		if m, err := a1.out.Migrate(Caller{}, api.MigrateRequest{ID: ids[0], Node: "n2"}); err != nil || !m.OK {
			t.Fatalf("migrate back: %+v %v", m, err)
		}
		if err := a1.drain.Ask(user, "n2", "drain"); err == nil || !strings.Contains(err.Error(), "only root") {
			t.Fatalf("a user drains: %v", err)
		}
		if err := a1.drain.Ask(Caller{}, "n2", "nap"); err == nil || !strings.Contains(err.Error(), `"nap"`) {
			t.Fatalf("state nap: %v", err)
		}
		if err := a1.drain.Ask(Caller{}, "n9", "drain"); err == nil || !strings.Contains(err.Error(), `no node "n9"`) {
			t.Fatalf("node n9: %v", err)
		}
		if err := a1.drain.Ask(Caller{}, "n2", "drain"); err != nil {
			t.Fatal(err)
		}
		c.waitFor("n2's jobs to leave but the pinned one", 2*time.Minute, func() bool {
			for _, id := range ids[:7] {
				if c.homeRec(id).Node == "n2" {
					return false
				}
			}
			return true
		})
		if rec := c.homeRec(ids[7]); rec.Node != "n2" || rec.State != job.StateRunning {
			t.Fatalf("the pinned job: %s on %s", rec.State, rec.Node)
		}
		// It does not leave the cluster while it runs a job; a node that
		// does not drain does not leave.
		if err := c.nodes[1].a.drain.Set(peer.DrainLeave); err == nil || !strings.Contains(err.Error(), "still runs 1 jobs") {
			t.Fatalf("n2 leaves with its pinned job: %v", err)
		}
		if err := c.nodes[2].a.drain.Set(peer.DrainLeave); err == nil || !strings.Contains(err.Error(), "is not draining") {
			t.Fatalf("n3 leaves without draining: %v", err)
		}
		for _, h := range c.nodes {
			c.waitFor(h.name+" to see n2 draining", time.Minute, func() bool {
				for _, n := range h.a.Nodes() {
					if n.ID == "n2" {
						return n.Draining
					}
				}
				return false
			})
		}
		more, err := a1.launch.Run(user, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 6})
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range more.Nodes {
			if n == "n2" {
				t.Fatalf("job %s placed on the draining node", more.IDs[i])
			}
		}
		if _, err := a1.launch.Run(user, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 1, On: "n2"}); err == nil || !strings.Contains(err.Error(), "draining") {
			t.Fatalf("run --on n2: %v", err)
		}
		if _, err := a1.out.Migrate(Caller{}, api.MigrateRequest{ID: more.IDs[0], Node: "n2"}); err == nil || !strings.Contains(err.Error(), "draining") {
			t.Fatalf("migrate to n2: %v", err)
		}
		// Kept across a restart of n2's agent.
		c.crash(1)
		c.start(1)
		if !c.nodes[1].a.drain.On() {
			t.Fatal("n2 forgot it drains when its agent restarted")
		}
		c.waitFor("n1 to see the restarted n2 draining", time.Minute, func() bool {
			for _, n := range a1.Nodes() {
				if n.ID == "n2" {
					return n.Alive && n.Draining
				}
			}
			return false
		})
		if err := a1.drain.Ask(Caller{}, "n2", "resume"); err != nil {
			t.Fatal(err)
		}
		if on, err := c.nodes[1].a.store.Draining(); on || err != nil {
			t.Fatalf("the job table keeps n2 draining after resume: %v", err)
		}
		c.waitFor("n1 to see n2 resumed", time.Minute, func() bool {
			for _, n := range a1.Nodes() {
				if n.ID == "n2" {
					return !n.Draining
				}
			}
			return false
		})
		back, err := a1.launch.Run(user, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 1, On: "n2"})
		if err != nil || back.Nodes[0] != "n2" {
			t.Fatalf("run --on n2 after resume: %+v %v", back, err)
		}
	})
}

// TestAgentsAdvertiseLostMetadataAgain: memberlist's UpdateNode can lose
// an update to a refute that runs between its two steps (after an agent's
// restart: TestAgentsDrainANode failed about once in 300 runs so). The
// loss is made here by hand: n2's flag changes without an update. Its
// probe ticks see memberlist holding other metadata and advertise it.
func TestAgentsAdvertiseLostMetadataAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 32, faults{}, "static")
		a1, a2 := c.nodes[0].a, c.nodes[1].a
		sees := func(want bool) func() bool {
			return func() bool {
				for _, n := range a1.Nodes() {
					if n.ID == "n2" {
						return n.Alive && n.Draining == want
					}
				}
				return false
			}
		}
		// As a drain would, without its update: the flag changes as a
		// start takes it from the job table (scheduler.Drain.Restore).
		flag := func(on bool) {
			if err := a2.store.PutDraining(on); err != nil {
				t.Fatal(err)
			}
			a2.drain.Restore()
		}
		flag(true)
		c.waitFor("n1 to see n2 draining", 10*time.Second, sees(true))
		flag(false)
		c.waitFor("n1 to see n2 resumed", 10*time.Second, sees(false))
	})
}
