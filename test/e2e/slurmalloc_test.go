package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"roam/internal/api"
)

// TestSlurmAllocationRunsInItsJob submits, as a user, an sbatch job on 3
// of the 4 nodes whose script runs `roam run -n 12` of short CPU-bound
// work: every process of it runs on the job's nodes only, in the Slurm
// job's extern step on its node (its freezer, memory and cpuacct groups,
// read from /proc), though the fourth node is idle; one moved by hand to
// another node of the job is restored into the job's extern step there,
// and one is not moved to the fourth; scancel ends every process on every
// node, and the home records each job ended, none lost nor started again.
func TestSlurmAllocationRunsInItsJob(t *testing.T) {
	needSlurm(t)
	c := upCluster(t, "salloc", 92, "--nodes", "4", "--cpu", "0.4", "--slurm")
	dir := sharedDir(t, "salloc-")
	if err := os.Chown(dir, int(jobUser.uid), int(jobUser.gid)); err != nil {
		t.Fatal(err)
	}
	// Each process burns half a second of CPU and waits; the batch
	// script's roam run follows them, as a user's would, so the job
	// lives until scancel.
	script := "#!/bin/sh\nexport ROAM_CLUSTER=" + c.name + "\nexec " + filepath.Join(binDir, "roam") + ` --node "${SLURMD_NODENAME#n}" run -n 12 -- sh -c 'timeout 0.5 sh -c "while :; do :; done"; exec sleep 600'` + "\n"
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
				// Memory's and cpuacct's: the step's task_0 where Slurm
				// made one (cmd/roamd's externGroups).
				want := fmt.Sprintf(":%s:/roam/%s/%s/slurm_%s/uid_%d/job_%s/step_extern", h, c.name, node, node, jobUser.uid, jobID)
				if (!strings.Contains(string(cg), want+"\n") && (h == "freezer" || !strings.Contains(string(cg), want+"/task_0\n"))) || node == "n4" {
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
	waitFor(t, 90*time.Second, "12 processes of roam's run in the Slurm job", func() (bool, string) {
		jobs := check("while they start")
		b, _ := os.ReadFile(filepath.Join(dir, "out"))
		return len(jobs) == 12, fmt.Sprintf("%v; the batch script said: %s", jobs, b)
	})
	// By hand, as the user: to another node of the job, not to n4.
	var id, from string
	waitFor(t, 30*time.Second, "the home records them running", func() (bool, string) {
		js := c.ps("1")
		for _, j := range js {
			if j.State != api.StateRunning {
				return false, fmt.Sprint(js)
			}
			id, from = j.ID, j.Node
		}
		return len(js) == 12, fmt.Sprint(js)
	})
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
	if len(onNodes) != 3 {
		t.Errorf("the 12 processes run on %v, want the job's 3 nodes", onNodes)
	}

	if out, err := c.slurmCmd(jobUser, "scancel", jobID).CombinedOutput(); err != nil {
		t.Fatalf("scancel %s: %v: %s", jobID, err, out)
	}
	waitFor(t, 60*time.Second, "scancel ended every process of roam's jobs", func() (bool, string) {
		jobs, _ := procs()
		return len(jobs) == 0, fmt.Sprint(jobs)
	})
	waitFor(t, 30*time.Second, "the home recorded every job ended", func() (bool, string) {
		js := c.ps("1") // the batch script's node, the jobs' home
		ended := 0
		for _, j := range js {
			switch {
			case j.Node == "4" || j.State == api.StateLost:
				t.Fatalf("job %s: on node %s, %s", j.ID, j.Node, j.State)
			case j.State == api.StateFinished:
				ended++
			}
		}
		return ended == 12 && len(js) == 12, fmt.Sprint(js)
	})
}
