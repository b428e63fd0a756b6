package agent

import (
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/api"
	"roam/internal/job"
	"roam/internal/procfs"
)

// A job one of whose processes changed its credentials (here a saved uid
// that is not the owner's) is refused at the source before anything
// freezes, with the process named, and not pinned: CRIU would fail to dump it on a host
// where root lacks CAP_SYS_RESOURCE, and the destination's check of the
// restored tasks would refuse it anyway, after a freeze for nothing.
func TestAgentsRefuseAJobWithChangedCredsBeforeFreezing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 26, faults{}, "static")
		r, err := c.nodes[0].a.Run(Caller{UID: 1001, GID: 1001}, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 1, On: "n1"})
		if err != nil {
			t.Fatal(err)
		}
		id := r.IDs[0]
		c.waitFor("running", time.Minute, func() bool { return c.homeRec(id).State == job.StateRunning })
		n1 := c.nodes[0].fn
		n1.mu.Lock()
		n1.restoredAs = &procfs.Creds{PID: 7, UIDs: [4]uint32{1001, 1001, 0, 1001}, GIDs: [4]uint32{1001, 1001, 1001, 1001}}
		n1.mu.Unlock()
		c.world.mu.Lock()
		dumps := c.world.counts["dump"]
		c.world.mu.Unlock()
		m, err := c.nodes[0].a.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: "n2"})
		if err == nil || m.OK || !strings.Contains(err.Error(), "task 7 runs as uids") || !strings.Contains(err.Error(), "changed their credentials") {
			t.Fatalf("migrate: %+v %v; want refused for task 7's uids", m, err)
		}
		c.world.mu.Lock()
		froze := c.world.counts["dump"] - dumps
		c.world.mu.Unlock()
		if froze != 0 {
			t.Fatalf("the job was frozen %d times for a move refused before", froze)
		}
		if run, frz := c.world.copies(id); len(run) != 1 || run[0] != "n1" || len(frz) != 0 {
			t.Fatalf("running on %v, frozen on %v", run, frz)
		}
		// Refused, not pinned: the process may be a set-user-id child
		// that ends, and the policies try again then.
		c.waitFor("the home's note", time.Minute, func() bool { return len(c.homeRec(id).MigrationLog) > 0 })
		if rec := c.homeRec(id); rec.PinReason != "" {
			t.Fatalf("pinned for a refusal that may pass: %q", rec.PinReason)
		}
		// As its owner throughout, it moves.
		n1.mu.Lock()
		n1.restoredAs = nil
		n1.mu.Unlock()
		if m, err := c.nodes[0].a.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: "n2"}); err != nil || !m.OK {
			t.Fatalf("then: %+v %v", m, err)
		}
	})
}
