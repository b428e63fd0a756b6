package agent

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/api"
	"roam/internal/job"
	"roam/internal/slurm"
)

// A sweep inside a Slurm allocation runs launch.JobsPerCPU jobs at once
// for each CPU the job holds, the others pending in the home's queue,
// which starts them as others end (within a second), on the allocation's
// nodes only: never on n4, outside it, though the policy's placement
// would pick it, idle.
// An explicit --max-running is kept. When Slurm ends the job, its pending
// jobs end unstarted (the home asks the controller), and none of them
// ever starts; while the controller does not answer, they wait.
func TestAgentsQueueInsideASlurmJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 4, 47, faults{}, "balance", slurmNodeNames)
		const user, inJob = 70702, 100
		var mu sync.Mutex
		state := map[string]string{"7": "RUNNING", "8": "RUNNING"}
		down := false // the controller does not answer
		asks := 0     // the questions with no caller: the home's queue's
		one := slurm.NodeAlloc{CPUs: 1}
		c.slurm = func(pid int32, id string) (string, slurm.Job, error) {
			mu.Lock()
			defer mu.Unlock()
			if pid == 0 {
				asks++
			}
			if down {
				return "", slurm.Job{}, errors.New("slurm_load_jobs error: Unable to contact slurm controller")
			}
			callerJob := ""
			if pid == inJob {
				callerJob = id
			}
			return callerJob, slurm.Job{ID: id, UID: user, State: state[id], Nodes: []string{"s1", "s2", "s3"},
				Alloc: map[string]slurm.NodeAlloc{"s1": one, "s2": one, "s3": one}}, nil
		}
		who := Caller{UID: user, GID: user, PID: inJob}
		run := func(id string, n, maxRunning int) api.RunResponse {
			t.Helper()
			resp, err := c.nodes[0].a.launch.Run(who, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: n, SlurmJob: id,
				SweepRequest: api.SweepRequest{MaxRunning: maxRunning}})
			if err != nil {
				t.Fatalf("run -n %d in Slurm job %s: %v", n, id, err)
			}
			return resp
		}
		time.Sleep(10 * time.Second) // every node's load entry heard: n4's shows it idle
		resp := run("7", 12, 0)
		if m := c.homeRec(resp.IDs[0]).Sweep.MaxRunning; m != 9 {
			t.Fatalf("the sweep's max running: %d, want 9 (3 a CPU, 3 CPUs)", m)
		}
		ids := resp.IDs
		// outside fails the test when a job runs outside the allocation
		// or more than 9 run at once, and counts those running.
		outside := func() int {
			on := c.runningOn(ids)
			if on["n4"] > 0 || on["n1"]+on["n2"]+on["n3"] > 9 {
				t.Fatalf("running on %v", on)
			}
			return on["n1"] + on["n2"] + on["n3"]
		}
		c.waitFor("9 run, 3 pending", time.Minute, func() bool {
			return outside() == 9 && len(c.whyPending(0, who)) == 3
		})
		for ended := 0; ended < 12; ended++ {
			var id string
			c.waitFor("a job runs", time.Minute, func() bool {
				outside()
				for _, j := range ids {
					if r, _ := c.world.copies(j); len(r) == 1 {
						id = j
						return true
					}
				}
				return false
			})
			c.exitJob(id, 0)
			if ended < 3 { // a pending job takes the place at once
				c.waitFor("a pending job starts in the place freed", time.Second, func() bool { return outside() == 9 })
			}
			time.Sleep(2 * time.Second) // n4's entries go on showing it idle
		}
		c.waitFor("the sweep ends", time.Minute, func() bool { return c.sweepOf(0, resp.Sweep, who).Ended })
		for _, id := range ids {
			if r := c.homeRec(id); r.State != job.StateFinished || r.Slurm != "7" || r.ExitCode == nil || *r.ExitCode != 0 {
				t.Fatalf("%s: %s, Slurm job %q, exit %v", id, r.State, r.Slurm, r.ExitCode)
			}
		}

		// --max-running 2 is the run's own; Slurm then ends the job.
		resp = run("8", 6, 2)
		ids = resp.IDs
		c.waitFor("2 run, 4 pending", time.Minute, func() bool {
			return outside() == 2 && len(c.whyPending(0, who)) == 4
		})
		// A controller that does not answer ends nothing.
		mu.Lock()
		down = true
		mu.Unlock()
		time.Sleep(time.Minute)
		if n := len(c.whyPending(0, who)); n != 4 {
			t.Fatalf("%d pending while the controller did not answer, want 4", n)
		}
		// Slurm kills the running ones first: the place freed takes no
		// pending job; the home asks at once (its last question, which
		// found the job running, a second and a half before), and ends
		// them unstarted.
		mu.Lock()
		down, before := false, asks
		mu.Unlock()
		c.waitFor("the home's next question", time.Minute, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return asks > before
		})
		time.Sleep(1500 * time.Millisecond)
		mu.Lock()
		state["8"] = "COMPLETING"
		mu.Unlock()
		var first string
		for _, id := range ids {
			if r, _ := c.world.copies(id); len(r) == 1 {
				first = id
				break
			}
		}
		c.exitJob(first, 137)
		c.waitFor("the pending jobs end", time.Minute, func() bool { return len(c.whyPending(0, who)) == 0 })
		unstarted := 0
		for _, id := range ids {
			if r := c.homeRec(id); strings.Contains(r.EndReason, "before it started") {
				unstarted++
			}
		}
		if on := outside(); on != 1 || unstarted != 4 {
			t.Fatalf("%d run once the Slurm job ended, %d ended before they started; want the 1 left of the 2 that ran (Slurm ends it), and 4", on, unstarted)
		}
	})
}
