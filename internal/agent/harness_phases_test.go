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
	"roam/internal/sched"
)

// A migration's log says where its time went: the steps of both nodes in
// the order they ran, the frozen ones adding up to its freeze, also when
// it failed and the job was thawed where it was.
func TestAgentsTimeEveryStepOfAMigration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 31, faults{}, "static")
		c.world.mu.Lock()
		c.world.dumpTime, c.world.restoreTime = 70*time.Millisecond, 40*time.Millisecond
		c.world.mu.Unlock()
		id := c.run(0, 1, "n2")[0]
		c.waitFor("running", time.Minute, func() bool { return c.homeRec(id).State == job.StateRunning })

		for _, lazy := range []bool{false, true} {
			to := map[bool]string{false: "n3", true: "n2"}[lazy]
			m, err := c.nodes[0].a.out.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: to, Lazy: lazy})
			if err != nil || !m.OK {
				t.Fatalf("migrate (lazy %v): %+v %v", lazy, m, err)
			}
			checkPhases(t, m, true)
			if ph := phase(m, api.SideSource, "criu dump"); ph == nil || ph.MS != 70 || !ph.Frozen {
				t.Fatalf("lazy %v: the source's dump step is %+v, want 70 ms frozen", lazy, ph)
			}
			if ph := phase(m, api.SideDest, "criu restore"); ph == nil || ph.MS != 40 || !ph.Frozen {
				t.Fatalf("lazy %v: the destination's restore step is %+v, want 40 ms frozen", lazy, ph)
			}
			if m.FreezeMS < 110 {
				t.Fatalf("lazy %v: freeze %v ms, less than its dump and restore", lazy, m.FreezeMS)
			}
			// The home's log has the same steps.
			c.waitFor("the home's log", time.Minute, func() bool {
				log := c.homeRec(id).MigrationLog
				return len(log) > 0 && log[len(log)-1].MID == m.MID && len(log[len(log)-1].Phases) == len(m.Phases)
			})
			if c.world.outsideCPU(id) {
				t.Fatalf("lazy %v: the job runs outside its CPU group", lazy)
			}
			t.Logf("lazy %v: freeze %v ms in %d steps", lazy, m.FreezeMS, len(m.Phases))
		}

		// A CPU group that refuses the restored job at first: the job runs
		// on, and goes into its group a few seconds later.
		c.world.mu.Lock()
		c.world.settleFail = 3
		c.world.mu.Unlock()
		if m, err := c.nodes[0].a.out.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: "n3"}); err != nil || !m.OK {
			t.Fatalf("migrate with a CPU group that refuses: %+v %v", m, err)
		}
		if !c.world.outsideCPU(id) {
			t.Fatal("the CPU group refused the job, and yet it is in it")
		}
		c.waitFor("the job in its CPU group", 10*time.Second, func() bool { return !c.world.outsideCPU(id) })
		if m, err := c.nodes[0].a.out.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: "n2"}); err != nil || !m.OK {
			t.Fatalf("migrate back: %+v %v", m, err)
		}

		// A restore that fails: the job was frozen for the dump and the
		// failed restore, and the log says so.
		c.world.mu.Lock()
		c.world.restoreFail = 1
		c.world.mu.Unlock()
		if m, err := c.nodes[0].a.out.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: "n3"}); err == nil || m.OK {
			t.Fatalf("migrate with a failing restore: %+v %v", m, err)
		}
		var m api.Migration
		c.waitFor("the failed move in the home's log", time.Minute, func() bool {
			log := c.homeRec(id).MigrationLog
			m = log[len(log)-1]
			return !m.OK && m.Error != ""
		})
		checkPhases(t, m, false)
		if phase(m, api.SideSource, "thaw") == nil || m.FreezeMS < 110 {
			t.Fatalf("failed migration: freeze %v ms, steps %+v; want the dump and restore counted and a thaw", m.FreezeMS, m.Phases)
		}
		if run, _ := c.world.copies(id); len(run) != 1 || run[0] != "n2" {
			t.Fatalf("after the failed move the job runs on %v", run)
		}
	})
}

// checkPhases: both sides' steps are there (the source's alone when the
// move failed), each known, and the frozen ones add up to the freeze.
func checkPhases(t *testing.T, m api.Migration, ok bool) {
	t.Helper()
	var frozen float64
	sides := map[string]int{}
	for _, p := range m.Phases {
		if p.Name == "" || p.Name == "other" || p.MS < 0 {
			t.Fatalf("step %+v", p)
		}
		sides[p.Side]++
		if p.Frozen {
			frozen += p.MS
		}
	}
	// A destination that failed answers with its error alone: its steps
	// are then in the source's step that waited for it.
	if sides[api.SideSource] == 0 || (ok && sides[api.SideDest] == 0) || len(sides) > 2 {
		t.Fatalf("steps by side %v", sides)
	}
	if diff := frozen - m.FreezeMS; diff > 0.01 || diff < -0.01 {
		t.Fatalf("frozen steps add up to %v ms, the freeze is %v ms: %+v", frozen, m.FreezeMS, m.Phases)
	}
	if ok {
		for _, want := range [][2]string{{api.SideSource, "judge"}, {api.SideSource, "check"}, {api.SideSource, "stream"},
			{api.SideSource, "commit"}, {api.SideDest, "receive"}, {api.SideDest, "adopt"}, {api.SideDest, "resume"}} {
			if phase(m, want[0], want[1]) == nil {
				t.Fatalf("no %s step %q in %+v", want[0], want[1], m.Phases)
			}
		}
		// The freeze ends with the destination's resume; a lazy move's
		// pages come after it.
		var last api.Phase
		for _, p := range m.Phases {
			if p.Frozen {
				last = p
			}
		}
		if last.Side != api.SideDest || last.Name != "resume" {
			t.Fatalf("the last frozen step is %+v, want the destination's resume", last)
		}
		// The job runs before it is moved into its CPU group.
		for _, name := range []string{"cpu cgroup"} {
			if p := phase(m, api.SideDest, name); p == nil || p.Frozen {
				t.Fatalf("destination step %q is %+v, want one, not frozen", name, p)
			}
		}
		if pc := phase(m, api.SideSource, "post-copy"); m.Lazy && (pc == nil || pc.Frozen) {
			t.Fatalf("lazy: post-copy step %+v, want one, not frozen", pc)
		}
	}
}

func phase(m api.Migration, side, name string) *api.Phase {
	for i, p := range m.Phases {
		if p.Side == side && p.Name == name {
			return &m.Phases[i]
		}
	}
	return nil
}

// A burst typed on one node leaves it at once, for every node the gain
// justifies, and the moves to different nodes run side by side
// (sched.Lanes; that one round decides them all is sched's
// TestBalanceSendsToTheNodeWithMostRoomPerCapacity): twelve jobs on n4 of
// four equal nodes end three on each after nine moves, with three dumps at
// once, in about three dumps' time.
func TestAgentsSpreadABurstAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 4, 33, faults{}, "balance")
		const dump = 200 * time.Millisecond
		c.world.mu.Lock()
		c.world.dumpTime = dump
		c.world.mu.Unlock()
		ids := c.run(3, 12, "n4")
		per := func() map[string]int { return c.runningOn(ids) }
		c.waitFor("a job leaves n4", time.Minute, func() bool { return per()["n4"] < 12 })
		first := time.Now()
		c.waitFor("three jobs on each node", time.Minute, func() bool {
			p := per()
			return p["n1"] == 3 && p["n2"] == 3 && p["n3"] == 3 && p["n4"] == 3
		})
		took := time.Since(first)
		time.Sleep(10 * time.Second) // later rounds move nothing more
		moves := 0
		for _, id := range ids {
			moves += c.homeRec(id).Migrations
		}
		c.world.mu.Lock()
		most := c.world.maxDumping
		c.world.mu.Unlock()
		t.Logf("9 moves in %v, at most %d dumps at once", took, most)
		if moves != 9 {
			t.Fatalf("%d moves, want 9 (three for each other node)", moves)
		}
		if most != 3 {
			t.Fatalf("at most %d dumps at once, want 3: a lane for each destination", most)
		}
		if took > 4*dump {
			t.Fatalf("the burst took %v to spread, more than the %v of three dumps one after the other (and the rest)", took, 4*dump)
		}
		if p := per(); p["n1"] != 3 || p["n2"] != 3 || p["n3"] != 3 || p["n4"] != 3 {
			t.Fatalf("jobs per node after more rounds: %v", p)
		}
	})
}

// A policy with lazy_mb moves a job that large lazily: the policy's
// choice reaches the migration (the fake jobs have 10 MiB).
func TestAgentsPolicyMovesLargeJobsLazily(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		pol := filepath.Join(t.TempDir(), "lazy.yaml")
		text := strings.Replace(sched.Builtin["balance"], "max_moves: 16,", "max_moves: 16, lazy_mb: 5,", 1)
		if err := os.WriteFile(pol, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		c := newCluster(t, 2, 34, faults{}, pol)
		ids := c.run(0, 2, "n1")
		var moved api.Migration
		c.waitFor("a job moved to n2", time.Minute, func() bool {
			for _, id := range ids {
				if log := c.homeRec(id).MigrationLog; len(log) > 0 && log[0].OK {
					moved = log[0]
					return true
				}
			}
			return false
		})
		if !moved.Lazy || !strings.Contains(moved.Why, "lazily") {
			t.Fatalf("the policy's move: lazy %v, why %q", moved.Lazy, moved.Why)
		}
	})
}
