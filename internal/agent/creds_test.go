package agent

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/api"
	"roam/internal/job"
	"roam/internal/proctext"
	"roam/internal/sched"
)

// A job one of whose processes changed its credentials (here a saved uid
// that is not the owner's) is refused at the source before anything
// freezes, with the process named, and not pinned: CRIU would fail to dump it on a host
// where root lacks CAP_SYS_RESOURCE, and the destination's check of the
// restored tasks would refuse it anyway, after a freeze for nothing.
func TestAgentsRefuseAJobWithChangedCredsBeforeFreezing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 26, faults{}, "static")
		id := runOneOn(t, c, Caller{UID: 1001, GID: 1001}, "n1")
		n1 := c.nodes[0].fn
		n1.mu.Lock()
		n1.restoredAs = &proctext.Creds{PID: 7, UIDs: [4]uint32{1001, 1001, 0, 1001}, GIDs: [4]uint32{1001, 1001, 1001, 1001}}
		n1.mu.Unlock()
		c.world.mu.Lock()
		dumps := c.world.counts["dump"]
		c.world.mu.Unlock()
		m, err := c.nodes[0].a.out.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: "n2"})
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
		if m, err := c.nodes[0].a.out.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: "n2"}); err != nil || !m.OK {
			t.Fatalf("then: %+v %v", m, err)
		}
	})
}

// A job that took something between the check and the freeze (a lock on
// a shared file, say) is judged again once frozen, before its images go:
// the move fails, the job runs on where it was, thawed, and no copy is
// left on the destination; once it lets go, it moves.
func TestAgentsFailAMoveWhenTheFrozenJobIsPinned(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 27, faults{}, "static")
		id := runOneOn(t, c, Caller{UID: 1001, GID: 1001}, "n1")
		n1 := c.nodes[0].fn
		const pin = "process 7 holds a POSIX lock on /shared/db"
		n1.mu.Lock()
		n1.frozenPin = pin
		n1.mu.Unlock()
		c.world.mu.Lock()
		dumps := c.world.counts["dump"]
		c.world.mu.Unlock()
		m, err := c.nodes[0].a.out.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: "n2"})
		if err == nil || m.OK || !strings.Contains(err.Error(), "once frozen: "+pin) {
			t.Fatalf("migrate: %+v %v; want failed once frozen with %q", m, err, pin)
		}
		c.world.mu.Lock()
		froze := c.world.counts["dump"] - dumps
		c.world.mu.Unlock()
		if froze != 1 {
			t.Fatalf("the job was frozen %d times, want once (the second look is at the frozen job)", froze)
		}
		if run, frz := c.world.copies(id); len(run) != 1 || run[0] != "n1" || len(frz) != 0 {
			t.Fatalf("running on %v, frozen on %v; want running on n1 alone", run, frz)
		}
		if rec := c.homeRec(id); rec.Node != "n1" || rec.State != job.StateRunning {
			t.Fatalf("home record: %s on %s", rec.State, rec.Node)
		}
		// The source's abort reaches the destination on its own time; until
		// then the destination refuses the job as arriving.
		n2 := c.nodes[1].a
		c.waitFor("the destination to drop the failed move", time.Minute, func() bool {
			return n2.in.NotHere(id, "") == nil
		})
		n1.mu.Lock()
		n1.frozenPin = ""
		n1.mu.Unlock()
		if m, err := c.nodes[0].a.out.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: "n2"}); err != nil || !m.OK {
			t.Fatalf("then: %+v %v", m, err)
		}
		if run, _ := c.world.copies(id); len(run) != 1 || run[0] != "n2" {
			t.Fatalf("then running on %v, want n2", run)
		}
	})
}

// A job stopped with roam kill -s STOP stays stopped through a move that
// fails once it is frozen and through one that succeeds, and roam ps
// shows it stopped throughout; roam kill -s CONT continues it where it
// then runs.
func TestAgentsKeepAStoppedJobStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 28, faults{}, "static")
		owner := Caller{UID: 1001, GID: 1001}
		id := runOneOn(t, c, owner, "n1")
		a := c.nodes[0].a
		state := func() string {
			for _, j := range a.PS(owner, false) {
				if j.ID == id {
					return j.State
				}
			}
			return "absent"
		}
		signal := func(sig syscall.Signal) {
			t.Helper()
			res, err := a.control.Kill(owner, api.KillRequest{IDs: []string{id}, Signal: int(sig)})
			if err != nil || len(res) != 1 || res[0].Error != "" {
				t.Fatalf("kill -s %d: %+v %v", sig, res, err)
			}
		}
		signal(syscall.SIGSTOP)
		if s := state(); s != api.StateStopped {
			t.Fatalf("after SIGSTOP: %s", s)
		}
		// A move that fails once the job is frozen.
		n1 := c.nodes[0].fn
		n1.mu.Lock()
		n1.frozenPin = "process 7 holds a POSIX lock on /shared/db"
		n1.mu.Unlock()
		if _, err := a.out.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: "n2"}); err == nil {
			t.Fatal("the move did not fail")
		}
		if run, frz := c.world.copies(id); len(run) != 0 || len(frz) != 1 || frz[0] != "n1" || state() != api.StateStopped {
			t.Fatalf("after the failed move: running on %v, frozen on %v, ps %s; want stopped on n1", run, frz, state())
		}
		c.waitFor("the destination to drop the failed move", time.Minute, func() bool {
			return c.nodes[1].a.in.NotHere(id, "") == nil
		})
		n1.mu.Lock()
		n1.frozenPin = ""
		n1.mu.Unlock()
		if m, err := a.out.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: "n2"}); err != nil || !m.OK {
			t.Fatalf("migrate: %+v %v", m, err)
		}
		if run, frz := c.world.copies(id); len(run) != 0 || len(frz) != 1 || frz[0] != "n2" || state() != api.StateStopped {
			t.Fatalf("after the move: running on %v, frozen on %v, ps %s; want stopped on n2", run, frz, state())
		}
		signal(syscall.SIGCONT)
		if run, _ := c.world.copies(id); len(run) != 1 || run[0] != "n2" || state() != api.StateRunning {
			t.Fatalf("after SIGCONT: running on %v, ps %s; want running on n2", run, state())
		}
	})
}

// runOneOn runs one job of caller's from n1 on node on, and waits until it
// runs.
func runOneOn(t *testing.T, c *cluster, caller Caller, on string) string {
	t.Helper()
	r, err := c.nodes[0].a.launch.Run(caller, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 1, On: on})
	if err != nil {
		t.Fatal(err)
	}
	id := r.IDs[0]
	c.waitFor("running", time.Minute, func() bool { return c.homeRec(id).State == job.StateRunning })
	return id
}

// A checkpoint file goes to the job's owner: once the job is frozen, a
// task that is not dumpable (a set-uid program that dropped to the
// owner's uids keeps secrets so) or that runs as another user (a set-uid
// program started after the first look) refuses the checkpoint, naming
// the task; the job runs on, thawed, and no file is left of it. As the
// owner's, dumpable but for its roam-init, it is checkpointed.
func TestAgentsRefuseACheckpointOfTasksTheOwnerCannotRead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 29, faults{}, "static")
		owner := Caller{UID: 70001, GID: 70001}
		id := runOneOn(t, c, owner, "n1")
		n1, a := c.nodes[0].fn, c.nodes[0].a
		mine := proctext.Creds{PID: 9, UIDs: [4]uint32{70001, 70001, 70001, 70001}, GIDs: [4]uint32{70001, 70001, 70001, 70001}}
		noDump := mine
		noDump.NoDump = true
		setuid := mine
		setuid.UIDs = [4]uint32{70001, 0, 0, 0}
		for _, tc := range []struct {
			name string
			as   proctext.Creds
			want string
		}{
			{"a non-dumpable task", noDump, "task 9 of user 70001 is not dumpable"},
			{"a set-user-id task", setuid, "task 9 runs as uids [70001 0 0 0]"},
		} {
			n1.mu.Lock()
			n1.frozenAs = &tc.as
			n1.mu.Unlock()
			w := httptest.NewRecorder()
			err := a.checkpoints.Checkpoint(owner, api.CheckpointRequest{ID: id}, w)
			if err == nil || !strings.Contains(err.Error(), "once frozen: "+tc.want) || w.Body.Len() != 0 {
				t.Fatalf("%s: %v, %d bytes written; want refused with %q", tc.name, err, w.Body.Len(), tc.want)
			}
			if run, frz := c.world.copies(id); len(run) != 1 || run[0] != "n1" || len(frz) != 0 {
				t.Fatalf("%s: running on %v, frozen on %v; want running on n1", tc.name, run, frz)
			}
			for _, dir := range []string{a.keeper.Dir(), a.imageDir} {
				if left, _ := os.ReadDir(dir); len(left) != 0 {
					t.Fatalf("%s: %s holds %v", tc.name, dir, left)
				}
			}
		}
		// roam-init, the job's first process, makes itself non-dumpable:
		// not a refusal.
		initAs := noDump
		rec, _ := a.jobs.LocalRec(id)
		initAs.PID = rec.PID
		for _, as := range []proctext.Creds{mine, initAs} {
			n1.mu.Lock()
			n1.frozenAs = &as
			n1.mu.Unlock()
			w := httptest.NewRecorder()
			if err := a.checkpoints.Checkpoint(owner, api.CheckpointRequest{ID: id}, w); err != nil || w.Code != http.StatusOK || w.Body.Len() == 0 {
				t.Fatalf("as %+v: %v, status %d, %d bytes", as, err, w.Code, w.Body.Len())
			}
		}
	})
}

// A job whose output has a hole (a 4 GiB stdout of a few blocks) is
// refused a move, before a byte of it moves, runs on where it was, and is
// pinned with the reason: at its home (roam ps), and here, where the
// policies then leave it (Unmovable), so it is not frozen again for
// nothing.
func TestAgentsPinAJobWithSparseOutput(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 29, faults{}, "static")
		id := runOneOn(t, c, Caller{UID: 1001, GID: 1001}, "n1")
		if err := os.Truncate(filepath.Join(c.nodes[0].fn.SpoolDir(id), "stdout"), 4<<30); err != nil {
			t.Fatal(err)
		}
		// A drain's move: the one kind the destination admits whatever
		// its load.
		mv := sched.Move{Job: id, From: "n1", To: "n2", Kind: "drain", Why: "test"}
		if c.nodes[0].a.sched.Move(mv) {
			t.Fatal("a job with sparse output moved")
		}
		if run, frz := c.world.copies(id); len(run) != 1 || run[0] != "n1" || len(frz) != 0 {
			t.Fatalf("running on %v, frozen on %v", run, frz)
		}
		c.waitFor("the home's note", time.Minute, func() bool { return strings.Contains(c.homeRec(id).PinReason, "sparse output") })
		var held string
		for _, j := range c.nodes[0].a.sched.Snapshot().Jobs {
			if j.ID == id {
				held = j.Held
			}
		}
		if !strings.Contains(held, "sparse output") {
			t.Fatalf("the job's node holds it movable (%q): the policies would freeze it again", held)
		}
	})
}
