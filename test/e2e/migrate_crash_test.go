package e2e

import (
	"fmt"
	"os"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// copyNode is the node of the emulated cluster a copy of job id runs on,
// read from the spool directory bound at /run/roam/job in its mounts.
func copyNode(pid int, id string) string {
	mi, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/mountinfo")
	m := regexp.MustCompile(`/n([0-9]+)/spool/` + regexp.QuoteMeta(id) + ` /run/roam/job `).FindSubmatch(mi)
	if m == nil {
		return "?"
	}
	return string(m[1])
}

// An agent killed in the middle of a migration, on either side, loses
// nothing: once it is back, the job runs exactly once, no stopped copy is
// left anywhere, and the home's record names the node it runs on. The
// source is killed while CRIU dumps (the job is frozen, nothing decided):
// restarted, it finds the undecided migration in its ledger, aborts it
// and thaws the job. The destination is killed while it receives: the
// source's stream fails and it thaws; the restarted destination discards
// what it had.
func TestAgentKilledMidMigrationLosesNothing(t *testing.T) {
	c := upCluster(t, "e2ecrash", 29, "--nodes", "3", "--cpu", "0.6,0.6,0.6", "--scheduler", "static")
	c.waitAllAlive(3)
	prog := migjob(t)
	for _, victim := range []string{"1", "2"} {
		t.Run("kill node "+victim, func(t *testing.T) {
			c.t = t
			id := c.start("1", prog, "mem", "90", marker(t), "1024")
			c.waitLines(id, 2)
			migrate := c.roamCmd("--node", "3", "migrate", id, "2")
			if err := migrate.Start(); err != nil {
				t.Fatal(err)
			}
			// The job is frozen: the dump runs.
			waitFor(t, 30*time.Second, id+" frozen for its dump", func() (bool, string) {
				_, states := copies(id)
				return len(states) >= 1 && states[0] == 'T', string(states)
			})
			n, _ := strconv.Atoi(victim)
			if err := syscall.Kill(c.status().Nodes[n-1].PID, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			_ = migrate.Wait()
			c.mustRun("cluster", "start", victim)
			c.waitAllAlive(3)
			var where string
			waitFor(t, 90*time.Second, id+" runs once, nothing stopped left", func() (bool, string) {
				pids, states := copies(id)
				if len(pids) != 1 || states[0] == 'T' || states[0] == 't' {
					return false, fmt.Sprintf("copies %v states %q (%s)", pids, states, roamInits())
				}
				where = copyNode(pids[0], id)
				j := c.job(id)
				return j.Node == where, fmt.Sprintf("runs on %s, home says %s", where, j.Node)
			})
			// It goes on working where it runs.
			before := c.lines(id)
			c.waitLines(id, before+2)
			t.Logf("after the kill of node %s's agent, %s runs on node %s; its log: %+v", victim, id, where, c.job(id).MigrationLog)
			c.mustRun("--node", "1", "kill", id)
			c.waitFinished(id, 30*time.Second)
		})
	}
}
