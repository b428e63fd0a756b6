package agent

import (
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/agent/rounds"
	"roam/internal/api"
	"roam/internal/job"
	"roam/internal/migrate"
	"roam/internal/proctext"
	"roam/internal/sched"

	"golang.org/x/sys/unix"
)

// A member's start request whose job id climbs out of the spool ("../")
// or names another home is refused, job by job, and makes nothing.
func TestPeerStartRefusesBadJobIDs(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 15, faults{}, "static")
		home, n2 := c.nodes[0].a, c.nodes[1]
		outside := filepath.Dir(n2.fn.SpoolDir("x"))
		for _, id := range []string{"../../evil.1", "n1/../../evil.1", "../n1.1", "n1.1/../../x.2", ".n1.1", "n2.1", "n1.-1", "n1.1 "} {
			req := peer.StartRequest{Home: "n1", HomeAddr: home.peers.SelfAddr, Jobs: []job.Spec{{ID: id, Argv: []string{"/bin/true"}, Cwd: "/"}}}
			var res []peer.StartResult
			if err := home.peers.Call("n2", "POST", "/v1/peer/start", req, &res); err != nil {
				t.Fatalf("%q: %v", id, err)
			}
			if len(res) != 1 || !strings.Contains(res[0].Error, "bad job id") || res[0].PID != 0 {
				t.Fatalf("%q: %+v, want refused as a bad job id", id, res)
			}
		}
		// A good id with a bad home address is refused too.
		req := peer.StartRequest{Home: "n1", HomeAddr: "../x", Jobs: []job.Spec{{ID: "n1.77", Argv: []string{"/bin/true"}, Cwd: "/"}}}
		var res []peer.StartResult
		if err := home.peers.Call("n2", "POST", "/v1/peer/start", req, &res); err != nil || len(res) != 1 || !strings.Contains(res[0].Error, "bad home address") {
			t.Fatalf("bad home address: %+v %v", res, err)
		}
		nlocal := n2.a.jobs.Count()
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
		if m, err := c.nodes[0].a.out.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: "n3"}); err != nil || !m.OK {
			t.Fatalf("migrate: %+v %v", m, err)
		}
		// The stream's connection is replayed once it closes; the source
		// keeps it open for its next call to n3.
		c.nodes[1].a.peers.HTTP.CloseIdleConnections()
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
		id := c.userJobOnN1()
		n2 := c.nodes[1].fn
		n2.mu.Lock()
		n2.restoredAs = &proctext.Creds{PID: 1, UIDs: [4]uint32{1001, 0, 1001, 1001}, GIDs: [4]uint32{1001, 1001, 1001, 1001}}
		n2.mu.Unlock()
		m, err := c.nodes[0].a.out.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: "n2"})
		if err == nil || m.OK || !strings.Contains(err.Error(), "runs as uids") {
			t.Fatalf("migrate: %+v %v; want refused for the restored tasks' uids", m, err)
		}
		c.runsOnlyOnN1(id)
		// A late abort of the failed move (the source's, delivered again)
		// is answered from its ended record, which is never listed as
		// coming: the destination does not take the job for arriving
		// while it answers.
		ins, err := c.nodes[1].a.store.Ins()
		if err != nil || len(ins) != 1 || !migrate.Rebuild(ins[0]).Final() {
			t.Fatalf("n2's ledger: %+v %v; want the failed move, ended", ins, err)
		}
		if in := c.nodes[1].a.in.AdoptRecord(ins[0], migrate.Rebuild(ins[0])); !in.Ended() {
			t.Fatal("an ended move's record was adopted as not final")
		}
		if err := c.nodes[1].a.in.NotHere(id, ""); err != nil {
			t.Fatalf("with the failed move's record adopted: %v", err)
		}
		if err := c.nodes[1].a.in.Abort(ins[0].MID); err != nil && !errors.Is(err, peer.ErrBadRequest) {
			t.Fatalf("late abort: %v", err)
		}
		// With the owner's credentials, it moves.
		n2.mu.Lock()
		n2.restoredAs = nil
		n2.mu.Unlock()
		if m, err := c.nodes[0].a.out.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: "n2"}); err != nil || !m.OK {
			t.Fatalf("then: %+v %v", m, err)
		}
	})
}

// userJobOnN1 starts a job of user 1001 on n1, its home, and waits until
// it runs.
func (c *cluster) userJobOnN1() string {
	c.t.Helper()
	r, err := c.nodes[0].a.launch.Run(Caller{UID: 1001, GID: 1001}, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 1, On: "n1"})
	if err != nil {
		c.t.Fatal(err)
	}
	id := r.IDs[0]
	c.waitFor("running", time.Minute, func() bool { return c.homeRec(id).State == job.StateRunning })
	return id
}

// runsOnlyOnN1 waits until job id has settled and checks that it runs on
// n1 alone. A refused move's abort reaches its destination on its own
// time (until then the destination refuses the job as arriving): it also
// waits until every other node would take the job.
func (c *cluster) runsOnlyOnN1(id string) {
	c.t.Helper()
	c.waitFor("settled on n1", time.Minute, func() bool { ok, _ := c.settled([]string{id}); return ok })
	if run, frz := c.world.copies(id); len(run) != 1 || run[0] != "n1" || len(frz) != 0 {
		c.t.Fatalf("running on %v, frozen on %v", run, frz)
	}
	for _, h := range c.nodes[1:] {
		c.waitFor(h.name+" to drop the refused move", time.Minute, func() bool { return h.a.in.NotHere(id, "") == nil })
	}
}

// The destination compares the files the restored job holds with those
// its check found before anything froze: CRIU reopened each by path, as
// root, since. A file in a shared directory the check did not cover (the
// target of a symlink swapped in after the check) and a node-local file
// its owner cannot open so are refused; the job runs on at its source,
// and moves once the restored job holds what the check found.
func TestAgentsRefuseARestoreHoldingOtherFiles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 25, faults{}, "static")
		id := c.userJobOnN1()
		n2 := c.nodes[1].fn
		for _, tc := range []struct {
			held migrate.OpenFile
			want string
		}{
			{migrate.OpenFile{Path: "/srv/shared/victim", Access: "w", Same: true}, "the check did not cover"},
			{migrate.OpenFile{Path: "/etc/shadow", Access: "r"}, "cannot open so"},
		} {
			n2.mu.Lock()
			n2.restoredFiles = []migrate.OpenFile{tc.held}
			n2.mu.Unlock()
			m, err := c.nodes[0].a.out.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: "n2"})
			if err == nil || m.OK || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), tc.held.Path) {
				t.Fatalf("restored holding %s: %+v %v; want refused, naming it (%q)", tc.held.Path, m, err, tc.want)
			}
			c.runsOnlyOnN1(id)
		}
		n2.mu.Lock()
		n2.restoredFiles = nil
		n2.mu.Unlock()
		if m, err := c.nodes[0].a.out.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: "n2"}); err != nil || !m.OK {
			t.Fatalf("then: %+v %v", m, err)
		}

		// A file the job opened between the check and the freeze (in a
		// shared directory, so it must be the source's very file): the
		// source sends it in a late check, the destination checks it as
		// the owner, and the restored job may hold it.
		var st unix.Stat_t
		var fs unix.Statfs_t
		if unix.Stat("/etc/passwd", &st) != nil || unix.Statfs("/etc/passwd", &fs) != nil {
			t.Fatal("stat /etc/passwd")
		}
		passwd := migrate.OpenFile{Path: "/etc/passwd", Access: "r", FSID: [2]int32{fs.Fsid.Val[0], fs.Fsid.Val[1]}, Ino: st.Ino, Same: true}
		src := c.nodes[1].fn
		dst := c.nodes[0].fn
		src.mu.Lock()
		src.restoredFiles = []migrate.OpenFile{passwd}
		src.mu.Unlock()
		dst.mu.Lock()
		dst.restoredFiles = []migrate.OpenFile{passwd}
		dst.mu.Unlock()
		m, err := c.nodes[0].a.out.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: "n1"})
		if err != nil || !m.OK {
			t.Fatalf("a file opened after the check: %+v %v", m, err)
		}
		if phase(m, api.SideSource, "check late files") == nil {
			t.Fatalf("no late check in %+v", m.Phases)
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
		future := api.PolicyRequest{Text: sched.Builtin["balance"], At: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC), Version: 1 << 61}
		var np api.NodePolicy
		if err := n1.peers.Call("n2", "POST", "/v1/peer/policy", future, &np); err != nil || np.Name != "balance" {
			t.Fatalf("the future policy: %+v %v", np, err)
		}
		c.waitFor("gossip spreads it", 2*time.Minute, func() bool {
			for _, h := range c.nodes {
				if h.a.sched.Policy().Name != "balance" {
					return false
				}
			}
			return true
		})
		res, err := n1.sched.LoadPolicy(Caller{}, api.PolicyRequest{Name: "mosix"})
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
			if got := h.a.sched.Policy().Name; got != "mosix" {
				t.Fatalf("node %s went back to %s", h.name, got)
			}
		}
		// A version past the bound, by the peer route or in the gossip's
		// state, is refused: at the top of uint64, the next load's
		// version (plus one) would wrap to 0 and never win again.
		top := api.PolicyRequest{Text: sched.Builtin["static"], At: time.Now(), Version: math.MaxUint64}
		if err := n1.peers.Call("n2", "POST", "/v1/peer/policy", top, &np); !errors.Is(err, peer.ErrBadRequest) {
			t.Fatalf("a policy of version 2^64-1: %v, want refused", err)
		}
		c.nodes[2].a.gossip.MergeRemoteState(fzJSON(t, top), false)
		time.Sleep(time.Minute)
		for _, h := range c.nodes {
			if got := h.a.sched.Policy().Name; got != "mosix" {
				t.Fatalf("node %s runs %s after a version past the bound", h.name, got)
			}
		}
		if res, err := n1.sched.LoadPolicy(Caller{}, api.PolicyRequest{Name: "balance"}); err != nil || len(res) != 3 || res[0].Name != "balance" {
			t.Fatalf("a load after it: %+v %v", res, err)
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
		if got := rounds.Newer(c.av, c.at, c.bv, c.bt); got != c.newer {
			t.Errorf("%d %q over %d %q: %v", c.av, c.at, c.bv, c.bt, got)
		}
	}
}

// A migration stream is taken only from the node its header names as its
// source (the sender's certificate, here its host): the destination
// fetches a lazy migration's pages from that node and tells the home the
// job came from there. The same header from its own source passes that
// check (and is refused later, for no migration was announced).
func TestAgentsRefuseAStreamFromAnotherSource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 17, faults{}, "static")
		n2 := c.nodes[1].a
		addr, err := n2.members.PeerAddr("n3")
		if err != nil {
			t.Fatal(err)
		}
		send := func(from string) error {
			hdr := `{"mid":"0123456789abcdef","from":"` + from + `","id":"n1.9","home":"n1","home_addr":"127.0.0.1:7947","owner":{"UID":1000,"GID":1000}}` + "\n"
			return n2.peers.Do(time.Minute, addr, "POST", peer.MigrateStream, strings.NewReader(hdr), nil)
		}
		err = send("n1")
		if !errors.Is(err, peer.ErrPermission) || !strings.Contains(err.Error(), `names node "n1" as its source, and node "n2" sent it`) {
			t.Fatalf("a header naming n1, sent by n2: %v", err)
		}
		if err := send("n2"); err == nil || errors.Is(err, peer.ErrPermission) {
			t.Fatalf("a header naming its sender n2: %v, want past the source check", err)
		}
	})
}
