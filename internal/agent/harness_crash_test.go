package agent

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/api"
)

// An agent that crashes while it resumes a job that came to it records
// nothing its dead hands did not do: its destination, crashed between
// the adoption of the copy and its thaw, finds at its restart a copy
// not resumed, and resumes it. (A crash that let the agent record the
// resume its dead node never carried out left the only copy of the job
// frozen for good: TestAgentsMigrateUnderFaults, "running on [], frozen
// on [n4]".)
func TestCrashAtTheResumeLeavesNoFrozenJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 1, faults{}, "static")
		id := c.run(0, 1, "n1")[0]
		dest := c.nodes[1]
		crashed := make(chan struct{})
		var once sync.Once
		dest.fn.mu.Lock()
		fn := dest.fn
		fn.onThaw = func(int) {
			once.Do(func() {
				// The crash comes as the destination thaws its copy: the
				// thaw, and whatever follows it, is the dead agent's.
				go func() { c.crash(1); close(crashed) }()
				for !fn.dead.Load() {
					time.Sleep(time.Millisecond)
				}
			})
		}
		dest.fn.mu.Unlock()
		go func() { _, _ = c.nodes[0].a.out.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: "n2"}) }()
		<-crashed
		if run, fz := c.world.copies(id); len(run) != 0 || fmt.Sprint(fz) != "[n2]" {
			t.Fatalf("job %s at the crash: running on %v, frozen on %v; want frozen on n2 only", id, run, fz)
		}
		c.start(1)
		c.waitRunsOnlyOn(id, "n2", 5*time.Minute, "after its destination restarted")
	})
}

// waitRunsOnlyOn waits (c.waitFor) up to within for job id to run on
// node and nowhere else, with no frozen copy anywhere; a failure says
// when (after what) and logs the job's details (c.explain).
func (c *cluster) waitRunsOnlyOn(id, node string, within time.Duration, after string) {
	c.t.Helper()
	defer func() {
		if c.t.Failed() {
			c.explain(id)
		}
	}()
	c.waitFor(fmt.Sprintf("job %s running on %s only, no copy frozen, %s", id, node, after), within, func() bool {
		run, fz := c.world.copies(id)
		return fmt.Sprint(run) == "["+node+"]" && len(fz) == 0
	})
}

// A fake process never has the test binary's pid, which the agent asks
// the start of as its own (fencing.New: StartTicks(os.Getpid())). A
// restored copy that had it was given the agent's start, not its own: its
// destination never found it alive to thaw, and its node reported it
// killed (137) to its home. TestAgentsMigrateUnderFaults failed so, about
// once in a few runs, whenever the machine's pids had come round to the
// harness's: "running on [], frozen on [n2]", the job finished 137.
func TestARestoredCopyNeverHasTheAgentsPid(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 1, faults{}, "static")
		id := c.run(0, 1, "n1")[0]
		c.world.mu.Lock()
		c.world.next = os.Getpid() - 1 // the next spawn, the copy restored on n2
		c.world.mu.Unlock()
		if _, err := c.nodes[0].a.out.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: "n2"}); err != nil {
			t.Fatalf("migrate %s to n2: %v", id, err)
		}
		c.waitRunsOnlyOn(id, "n2", time.Minute, "after its move")
		if rec := c.homeRec(id); rec.Over() {
			t.Fatalf("job %s is %s (exit %v) at its home after its move; want running", id, rec.State, rec.ExitCode)
		}
	})
}
