package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"roam/internal/api"
	"roam/internal/emu"
	"roam/internal/slurm/stepd"
)

// TestSlurmAllocationRunsInItsJob submits, as a user, an sbatch job on 3
// of the 4 nodes whose script runs `roam run -n 60` of CPU-bound work of
// mixed lengths: 9 at once (3 for each CPU the job holds), the others
// pending in the home's queue until others end; every process of it runs
// on the job's nodes only, in the Slurm job's extern step on its node (its
// freezer group, and its memory and cpuacct groups of the step's task on
// that node, read from /proc), though the fourth node is idle; one moved
// by hand to another node of the job is restored into the job's extern
// step there, and one is not moved to the fourth. The last ten wait
// rather than end, so 9 of them run and one stays pending: scancel ends
// every process on every node, the home records each job ended, the
// pending one too (the home asks Slurm), none lost nor started again, and sacct
// counts the CPU the jobs burnt on every node (checkSacctCPU).
func TestSlurmAllocationRunsInItsJob(t *testing.T) {
	needSlurm(t)
	c := upCluster(t, "salloc", 95, "--nodes", "4", "--cpu", "0.4", "--slurm")
	burn := workload(t, "burn")
	dir := sharedDir(t, "salloc-")
	if err := os.Chown(dir, int(jobUser.uid), int(jobUser.gid)); err != nil {
		t.Fatal(err)
	}
	// Each process burns 0.1 to 0.5 s of CPU, says how much, and waits;
	// the batch script's roam run follows them, as a user's would, so
	// the job lives until scancel.
	script := "#!/bin/sh\nexport ROAM_CLUSTER=" + c.name + "\nexec " + filepath.Join(binDir, "roam") + ` --node "${SLURMD_NODENAME#n}" run -n ` + strconv.Itoa(allocJobs) + ` -- sh -c '` + burn + ` 0.$((ROAM_INDEX % 5 + 1)) 0; [ $ROAM_INDEX -lt ` + strconv.Itoa(allocJobs-allocWaiters) + ` ] || exec sleep 600'` + "\n"
	if err := os.WriteFile(filepath.Join(dir, "job.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := c.slurmCmd(jobUser, "sbatch", "--parsable", "-w", "n1,n2,n3", "-D", dir, "-o", filepath.Join(dir, "out"), filepath.Join(dir, "job.sh")).CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch: %v: %s", err, out)
	}
	jobID := strings.TrimSpace(string(out))

	// The processes of roam's jobs on this machine, read from /proc: each
	// job's pids group is roam's (jobs/ID under its node's), its freezer
	// group must be the Slurm job's extern step on the same node.
	jobGroup := regexp.MustCompile(`:pids:/roam/` + c.name + `/(n[0-9]+)/jobs/([^/\n]+)`)
	procs := func() (jobs map[string]string, bad []string) {
		jobs = map[string]string{}
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			cg, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
			m := jobGroup.FindSubmatch(cg)
			if err != nil || m == nil {
				continue
			}
			node, id := string(m[1]), string(m[2])
			jobs[id] = node
			for _, h := range []string{"freezer", "memory", "cpuacct"} {
				// Memory's and cpuacct's: the step's task on the node,
				// task_N for the node's index N in the job, the group
				// Slurm counts (cmd/roamd's externGroups).
				want := fmt.Sprintf(":%s:/roam/%s/%s/slurm_%s/uid_%d/job_%s/step_extern", h, c.name, node, node, jobUser.uid, jobID)
				if h != "freezer" {
					want += "/task_" + strconv.Itoa(slices.Index([]string{"n1", "n2", "n3"}, node))
				}
				if !strings.Contains(string(cg), want+"\n") || node == "n4" {
					bad = append(bad, fmt.Sprintf("pid %s of job %s on %s is not in the Slurm job's extern step there (%s):\n%s", e.Name(), id, node, strings.TrimSpace(want), cg))
				}
			}
		}
		return jobs, bad
	}
	check := func(why string) map[string]string {
		jobs, bad := procs()
		if len(bad) > 0 {
			b, _ := os.ReadFile(filepath.Join(dir, "out"))
			t.Fatalf("%s: %s\n(the batch script's output: %s)", why, bad[0], b)
		}
		return jobs
	}
	// The queue: never more than 9 starting or running at once, as the
	// home records them, until 9 of the waiters run and the last one is
	// pending. While they start, a process may be between roam's groups
	// and Slurm's (roam-init joins them before the program runs, and the
	// home records the job running once it has): counted here, checked
	// below.
	var id, from string
	waitFor(t, 120*time.Second, "all but the waiters ended, 9 running, 1 pending", func() (bool, string) {
		jobs, _ := procs()
		n := map[string]int{}
		js := c.ps("1")
		for _, j := range js {
			n[j.State]++
			if j.State == api.StateRunning {
				id, from = j.ID, j.Node
			}
		}
		if live := len(js) - n[api.StatePending] - n[api.StateFinished] - n[api.StateLost]; live > allocAtOnce {
			t.Fatalf("%d jobs start or run at once, want at most %d: %v", live, allocAtOnce, n)
		}
		b, _ := os.ReadFile(filepath.Join(dir, "out"))
		return len(js) == allocJobs && n[api.StateRunning] == allocAtOnce && n[api.StatePending] == 1 && len(jobs) == allocAtOnce,
			fmt.Sprintf("%v, processes %v; the batch script said: %s", n, jobs, b)
	})
	// By hand, as the user: to another node of the job, not to n4.
	check("once started")
	to := map[string]string{"1": "2", "2": "3", "3": "1"}[from]
	if out, err := c.roamAs(jobUser, "--node", from, "migrate", id, "4").CombinedOutput(); err == nil || !strings.Contains(string(out), "Slurm job "+jobID) {
		t.Fatalf("roam migrate %s 4, outside the Slurm job: %v: %s", id, err, out)
	}
	c.mustRunAs(jobUser, "--node", from, "migrate", id, to)
	waitFor(t, 30*time.Second, "the moved job's process in the Slurm job on its new node", func() (bool, string) {
		jobs := check("after the move")
		return jobs[id] == "n"+to, fmt.Sprint(jobs)
	})
	// n4 is idle all along; the policies keep them off it
	// (TestAgentsRunInsideASlurmJob waits for them on a fake clock).
	onNodes := map[string]int{}
	for _, n := range check("once they ran a while") {
		onNodes[n]++
	}
	if len(onNodes) < 2 {
		t.Errorf("the %d processes run on %v, want them spread over the job's 3 nodes", allocAtOnce, onNodes)
	}
	burnt := c.allocBurnt(dir, jobID)

	if out, err := c.slurmCmd(jobUser, "scancel", jobID).CombinedOutput(); err != nil {
		t.Fatalf("scancel %s: %v: %s", jobID, err, out)
	}
	waitFor(t, 60*time.Second, "scancel ended every process of roam's jobs", func() (bool, string) {
		jobs, _ := procs()
		return len(jobs) == 0, fmt.Sprint(jobs)
	})
	waitFor(t, 30*time.Second, "the home recorded every job ended", func() (bool, string) {
		js := c.ps("1") // the batch script's node, the jobs' home
		ended, unstarted := 0, 0
		for _, j := range js {
			switch {
			case j.Node == "4" || j.State == api.StateLost:
				t.Fatalf("job %s: on node %s, %s", j.ID, j.Node, j.State)
			case j.State == api.StateFinished:
				ended++
				if strings.Contains(j.EndReason, "before it started") {
					unstarted++
				}
			}
		}
		// The pending one ends before it started, or, taking a place
		// freed as Slurm killed the others before the home heard of the
		// end (launch's slurmEndAsk), is killed with them.
		return ended == allocJobs && len(js) == allocJobs && unstarted <= 1, fmt.Sprint(js)
	})
	c.checkSacctCPU(jobID, burnt)
}

// allocJobs is the size of the allocation test's run, allocAtOnce how
// many of them run at once (launch.JobsPerCPU for each of the 3 CPUs the
// job holds), and allocWaiters how many, the last, wait for scancel
// rather than end: one more than run at once, so one stays pending.
const (
	allocJobs    = 60
	allocAtOnce  = 9
	allocWaiters = allocAtOnce + 1
)

// allocBurnt waits until every job of the allocation test's run has said
// what CPU it burnt (in the batch script's output, in dir), and returns
// the sum. It then has each node's extern step of Slurm job jobID read
// its count (stepd.Client.Poll), as the agents do when a process ends:
// these processes wait rather than end, and Slurm's own reads come every
// 5 s.
func (c *cluster) allocBurnt(dir, jobID string) float64 {
	t := c.t
	t.Helper()
	var used float64
	waitFor(t, 120*time.Second, "every job burnt its CPU", func() (bool, string) {
		b, _ := os.ReadFile(filepath.Join(dir, "out"))
		n := strings.Count(string(b), "burn: done")
		used = burnCPU(t, filepath.Join(dir, "out"))
		return n == allocJobs-1, fmt.Sprintf("%d done", n) // the pending one never ran
	})
	for i, n := range []string{"n1", "n2", "n3"} {
		task := fmt.Sprintf("/sys/fs/cgroup/cpuacct/roam/%s/%s/slurm_%s/uid_%d/job_%s/step_extern/task_%d/cpuacct.usage", c.name, n, n, jobUser.uid, jobID, i)
		b, _ := os.ReadFile(task)
		t.Logf("%s: the extern step's task_%d counted %s ns", n, i, strings.TrimSpace(string(b)))
		step := stepd.Client{Spool: filepath.Join(emu.SlurmDir(c.name), n, "spool"), Node: n, Owners: []uint32{0}, Timeout: time.Minute}
		if err := step.Poll(jobID); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
	}
	return used
}

// checkSacctCPU checks sacct's count of Slurm job jobID's CPU time against
// burnt, what its jobs' burn say they did: the sum of its steps'
// TRESUsageInTot cpu= (each step's count, in seconds) at least burnt less
// guideCPUShare, and at most a quarter more (Slurm's count also holds
// what starting and moving the jobs cost: roam-init's set-up, CRIU's
// parasite and restorer, which run as the job; some 2 s of 60 jobs of 0.3
// s), and its TotalCPU likewise but for what Slurm 22.05 itself drops: it
// counts an extern step's CPU on each node in whole seconds, user and
// system time each rounded down (jobacct_gather's poll), up to 2 s a node
// (TestSlurmGuide's jobs are long enough to hold TotalCPU to 5 %).
func (c *cluster) checkSacctCPU(jobID string, burnt float64) {
	t := c.t
	t.Helper()
	waitFor(t, 60*time.Second, "sacct counts the job's CPU", func() (bool, string) {
		out, err := c.slurmCmd(jobUser, "sacct", "-j", jobID, "-n", "-P", "-o", "JobID,State,TotalCPU,TRESUsageInTot").CombinedOutput()
		if err != nil {
			return false, fmt.Sprintf("%v: %s", err, out)
		}
		total, tres, ended := -1.0, 0.0, 0
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Split(l, "|")
			if len(f) != 4 {
				return false, string(out)
			}
			if f[0] == jobID {
				total, _ = sacctSeconds(f[2])
				continue
			}
			if m := regexp.MustCompile(`(^|,)cpu=([0-9:.-]+)`).FindStringSubmatch(f[3]); m != nil {
				v, _ := sacctSeconds(m[2])
				tres += v
				ended++
			}
		}
		if total < 0 || ended < 2 { // the batch and extern steps
			return false, string(out)
		}
		t.Logf("sacct: %s; the jobs burnt %.2f CPU-s", strings.ReplaceAll(strings.TrimSpace(string(out)), "\n", "; "), burnt)
		if tres < burnt*(1-guideCPUShare) || tres > burnt*1.25 {
			t.Errorf("sacct's TRESUsageInTot cpu of job %s's steps: %.0f s, its jobs burnt %.2f s", jobID, tres, burnt)
		}
		if total < burnt*(1-guideCPUShare)-2*3 || total > burnt*1.25 {
			t.Errorf("sacct's TotalCPU of job %s: %.2f s, its jobs burnt %.2f s", jobID, total, burnt)
		}
		return true, ""
	})
}
