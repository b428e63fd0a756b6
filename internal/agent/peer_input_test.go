package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/api"
	"roam/internal/job"
	"roam/internal/procfs"
	"roam/internal/sched"
)

// A member's start request whose job id climbs out of the spool ("../")
// or names another home is refused, job by job, and makes nothing.
func TestPeerStartRefusesBadJobIDs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 15, faults{}, "static")
		home, n2 := c.nodes[0].a, c.nodes[1]
		outside := filepath.Dir(n2.fn.SpoolDir("x"))
		for _, id := range []string{"../../evil.1", "n1/../../evil.1", "../n1.1", "n1.1/../../x.2", ".n1.1", "n2.1", "n1.-1", "n1.1 "} {
			req := startRequest{Home: "n1", HomeAddr: home.selfAddr, Jobs: []job.Spec{{ID: id, Argv: []string{"/bin/true"}, Cwd: "/"}}}
			var res []startResult
			if err := home.peerCall("n2", "POST", "/v1/peer/start", req, &res); err != nil {
				t.Fatalf("%q: %v", id, err)
			}
			if len(res) != 1 || !strings.Contains(res[0].Error, "bad job id") || res[0].PID != 0 {
				t.Fatalf("%q: %+v, want refused as a bad job id", id, res)
			}
		}
		// A good id with a bad home address is refused too.
		req := startRequest{Home: "n1", HomeAddr: "../x", Jobs: []job.Spec{{ID: "n1.77", Argv: []string{"/bin/true"}, Cwd: "/"}}}
		var res []startResult
		if err := home.peerCall("n2", "POST", "/v1/peer/start", req, &res); err != nil || len(res) != 1 || !strings.Contains(res[0].Error, "bad home address") {
			t.Fatalf("bad home address: %+v %v", res, err)
		}
		n2.a.jobs.mu.Lock()
		nlocal := len(n2.a.jobs.local)
		n2.a.jobs.mu.Unlock()
		if nlocal != 0 {
			t.Fatalf("n2 runs %d jobs", nlocal)
		}
		for _, p := range []string{filepath.Join(outside, "..", "evil.1"), filepath.Join(outside, "evil.1")} {
			if _, err := os.Lstat(p); err == nil {
				t.Fatalf("%s was made", p)
			}
		}
		if run, _ := c.world.copies("../../evil.1"); len(run) != 0 {
			t.Fatalf("started on %v", run)
		}
	})
}

// A migration stream delivered twice (a member's replay, or a network
// that duplicates a connection) is taken once: the second is refused, and
// the copy the first one made runs on with its spool intact.
func TestAgentsRefuseADuplicatedMigrationStream(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 16, faults{}, "static")
		id := c.run(0, 1, "n2")[0]
		c.say(1, id, "before")
		c.waitFor("output home", time.Minute, func() bool { return c.homeOutput(id) == "before\n" })

		c.net.mu.Lock()
		c.net.dupPrefix = []byte("POST /v1/peer/migrate ")
		c.net.mu.Unlock()
		if m, err := c.nodes[0].a.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: "n3"}); err != nil || !m.OK {
			t.Fatalf("migrate: %+v %v", m, err)
		}
		// The stream's connection is replayed once it closes; the source
		// keeps it open for its next call to n3.
		c.nodes[1].a.peerHTTP.CloseIdleConnections()
		c.waitFor("the stream replayed and answered", time.Minute, func() bool {
			c.net.mu.Lock()
			defer c.net.mu.Unlock()
			return len(c.net.replies) > 0
		})
		c.net.mu.Lock()
		c.net.dupPrefix = nil
		replies := append([]string(nil), c.net.replies...)
		c.net.mu.Unlock()
		if len(replies) != 1 || !strings.HasPrefix(replies[0], "HTTP/1.1 4") {
			t.Fatalf("the replayed stream was answered %q, want one refusal", replies)
		}
		c.waitFor("settled on n3", time.Minute, func() bool { ok, _ := c.settled([]string{id}); return ok })
		if run, _ := c.world.copies(id); len(run) != 1 || run[0] != "n3" {
			t.Fatalf("runs on %v", run)
		}
		if b, err := os.ReadFile(filepath.Join(c.nodes[2].fn.SpoolDir(id), "stdout")); err != nil || string(b) != "before\n" {
			t.Fatalf("n3's spool of the job: %q %v", b, err)
		}
		c.say(2, id, "after")
		c.waitFor("output after the move home", time.Minute, func() bool { return c.homeOutput(id) == "before\nafter\n" })
		t.Logf("the replay was answered %q", replies[0])
	})
}

// A restored job whose tasks do not run as its owner (images that give
// them root's uid or capabilities) is killed before the commit; the
// migration fails and the job runs on at the source.
func TestAgentsRefuseARestoreWithOtherCreds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 23, faults{}, "static")
		r, err := c.nodes[0].a.Run(Caller{UID: 1001, GID: 1001}, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 1, On: "n1"})
		if err != nil {
			t.Fatal(err)
		}
		id := r.IDs[0]
		c.waitFor("running", time.Minute, func() bool { return c.homeRec(id).State == job.StateRunning })
		n2 := c.nodes[1].fn
		n2.mu.Lock()
		n2.restoredAs = &procfs.Creds{PID: 1, UIDs: [4]uint32{1001, 0, 1001, 1001}, GIDs: [4]uint32{1001, 1001, 1001, 1001}}
		n2.mu.Unlock()
		m, err := c.nodes[0].a.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: "n2"})
		if err == nil || m.OK || !strings.Contains(err.Error(), "runs as uids") {
			t.Fatalf("migrate: %+v %v; want refused for the restored tasks' uids", m, err)
		}
		c.waitFor("settled on n1", time.Minute, func() bool { ok, _ := c.settled([]string{id}); return ok })
		if run, frz := c.world.copies(id); len(run) != 1 || run[0] != "n1" || len(frz) != 0 {
			t.Fatalf("running on %v, frozen on %v", run, frz)
		}
		// With the owner's credentials, it moves.
		n2.mu.Lock()
		n2.restoredAs = nil
		n2.mu.Unlock()
		if m, err := c.nodes[0].a.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: "n2"}); err != nil || !m.OK {
			t.Fatalf("then: %+v %v", m, err)
		}
	})
}

// A policy from a member with a far-future time and a huge version (a
// node whose clock is ahead, or a bad peer) does not keep later loads out:
// the next `roam policy load` wins on every node, and gossip keeps it.
func TestAgentsLaterPolicyLoadWinsOverAFutureOne(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 24, faults{}, "static")
		n1 := c.nodes[0].a
		future := api.PolicyRequest{Text: sched.Builtin["balance"], At: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), Version: 1 << 62}
		var np api.NodePolicy
		if err := n1.peerCall("n2", "POST", "/v1/peer/policy", future, &np); err != nil || np.Name != "balance" {
			t.Fatalf("the future policy: %+v %v", np, err)
		}
		c.waitFor("gossip spreads it", 2*time.Minute, func() bool {
			for _, h := range c.nodes {
				if h.a.policyText().Name != "balance" {
					return false
				}
			}
			return true
		})
		res, err := n1.LoadPolicy(Caller{}, api.PolicyRequest{Name: "mosix"})
		if err != nil || len(res) != 3 {
			t.Fatalf("load: %+v %v", res, err)
		}
		for _, r := range res {
			if r.Name != "mosix" {
				t.Fatalf("node %s runs %s after the later load", r.Node, r.Name)
			}
		}
		time.Sleep(time.Minute) // a few push-pulls
		for _, h := range c.nodes {
			if got := h.a.policyText().Name; got != "mosix" {
				t.Fatalf("node %s went back to %s", h.name, got)
			}
		}
	})
}

// Which of two policy loads wins: the higher version; at one version, the
// greater text, the same on every node.
func TestPolicyNewer(t *testing.T) {
	for _, c := range []struct {
		av    uint64
		at    string
		bv    uint64
		bt    string
		newer bool
	}{
		{2, "a", 1, "b", true}, {1, "b", 2, "a", false}, {3, "b", 3, "a", true}, {3, "a", 3, "b", false}, {3, "a", 3, "a", false},
	} {
		if got := policyNewer(c.av, c.at, c.bv, c.bt); got != c.newer {
			t.Errorf("%d %q over %d %q: %v", c.av, c.at, c.bv, c.bt, got)
		}
	}
}
