package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"roam/internal/emu"
	"roam/internal/slurm"
	"roam/internal/slurm/scontrol"
)

// slurmCmd is a Slurm client of cluster c, run by o.
func (c *cluster) slurmCmd(o owner, args ...string) *exec.Cmd {
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+emu.SlurmConf(c.name))
	if o.uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: o.uid, Gid: o.gid, Groups: o.groups}}
	}
	return cmd
}

// TestSlurmArrayRunsOnTheNodes brings up an emulated cluster with Slurm
// (`roam cluster up --slurm`) and submits a job array as a user: each task
// runs on its own emulated node, as that user, in Slurm's cgroup inside
// the node's (seen from this machine), sacct reports every task completed
// with the CPU time it used, and no Slurm daemon listens on this machine's
// own addresses. The cluster's teardown checks that down leaves nothing.
// needSlurm skips a test without Slurm installed, or fails it under CI,
// which ran deps.sh: there a skip would hide a broken install.
func needSlurm(t *testing.T) {
	t.Helper()
	if missing := emu.SlurmMissing(); len(missing) > 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Slurm is not installed (%s missing), though deps.sh ran scripts/install-slurm.sh", strings.Join(missing, ", "))
		}
		t.Skipf("Slurm is not installed (%s missing): scripts/install-slurm.sh installs it", strings.Join(missing, ", "))
	}
}

func TestSlurmArrayRunsOnTheNodes(t *testing.T) {
	needSlurm(t)
	c := upCluster(t, "slurm", 91, "--nodes", "4", "--cpu", "0.4", "--slurm")
	dir := sharedDir(t, "slurm-")
	if err := os.Chown(dir, int(jobUser.uid), int(jobUser.gid)); err != nil {
		t.Fatal(err)
	}
	// Each task says where it runs and its pid (this machine's: slurmd
	// makes no PID namespace), burns a second of CPU and waits for the
	// test's word, so that its cgroup can be read while it lives.
	script := `#!/bin/sh
echo "$SLURMD_NODENAME $$ $(id -u)" > ` + dir + `/task-$SLURM_ARRAY_TASK_ID
timeout 1 sh -c 'while :; do :; done'
while [ ! -e ` + dir + `/go ]; do sleep 0.1; done
`
	if err := os.WriteFile(filepath.Join(dir, "job.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := c.slurmCmd(jobUser, "sbatch", "--parsable", "--array=1-4", "-o", "/dev/null", filepath.Join(dir, "job.sh")).CombinedOutput()
	if err != nil {
		t.Fatalf("sbatch: %v: %s", err, out)
	}
	jobID := strings.TrimSpace(string(out))

	nodes := map[string]bool{}
	pids := map[string]string{} // node: a task's pid there
	waitFor(t, 60*time.Second, "every task started", func() (bool, string) {
		for i := 1; i <= 4; i++ {
			if _, err := os.Stat(filepath.Join(dir, fmt.Sprintf("task-%d", i))); err != nil {
				return false, fmt.Sprintf("task %d: %v", i, err)
			}
		}
		return true, ""
	})
	for i := 1; i <= 4; i++ {
		b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("task-%d", i)))
		f := strings.Fields(string(b))
		if len(f) != 3 || f[2] != strconv.Itoa(int(jobUser.uid)) {
			t.Fatalf("task %d wrote %q, want NODE PID %d", i, b, jobUser.uid)
		}
		node, pid := f[0], f[1]
		nodes[node], pids[node] = true, pid
		cg, err := os.ReadFile("/proc/" + pid + "/cgroup")
		if err != nil {
			t.Fatalf("task %d on %s: %v", i, node, err)
		}
		// Slurm's freezer group of the job, inside the node's group.
		want := fmt.Sprintf(":freezer:/roam/slurm/%s/slurm_%s/uid_%d/job_", node, node, jobUser.uid)
		if !strings.Contains(string(cg), want) {
			t.Errorf("task %d on %s is not in Slurm's group inside the node's (%s):\n%s", i, node, want, cg)
		}
	}
	if len(nodes) != 4 {
		t.Errorf("the 4 tasks ran on %v, want one on each node", nodes)
	}
	listensOnlyInNodes(t)
	cancelled := c.slurmAdoptAndCancel(jobID, pids)
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}

	// The accounting reaches slurmdbd a moment after each task ends:
	// each task's line names its user, and its batch step's the CPU time
	// (the cancelled one's may have none).
	waitFor(t, 60*time.Second, "sacct reports every task", func() (bool, string) {
		out, err := c.slurmCmd(jobUser, "sacct", "-j", jobID, "-n", "-P", "-o", "JobIDRaw,User,State,TotalCPU").CombinedOutput()
		if err != nil {
			return false, fmt.Sprintf("%v: %s", err, out)
		}
		tasks, steps := 0, 0
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			f := strings.Split(l, "|")
			if len(f) != 4 {
				return false, string(out)
			}
			id, step, _ := strings.Cut(f[0], ".")
			ended := f[2] == "COMPLETED" || (id == cancelled && strings.HasPrefix(f[2], "CANCELLED"))
			if !ended {
				return false, string(out)
			}
			switch {
			case step == "" && f[1] == jobUser.name:
				tasks++
			case step == "batch" && (id == cancelled || usedCPU(f[3])):
				steps++
			}
		}
		return tasks == 4 && steps == 4, string(out)
	})
}

// slurmAdoptAndCancel checks, for the task running on each node (pids),
// what an agent checks of a caller that names its Slurm job: the job its
// cgroup shows, as scontrol reports it, passes slurm.Check there and not on
// another node. Then it adopts a process of the user's into one task's
// extern step, as an agent serving that job would, cancels the task, and
// waits for Slurm to end the process. It returns the cancelled task's id,
// one that is not also the array's (scancel of that cancels every task).
func (c *cluster) slurmAdoptAndCancel(array string, pids map[string]string) string {
	t := c.t
	t.Helper()
	var job, node, name string
	for n := range pids {
		cg, _ := os.ReadFile("/proc/" + pids[n] + "/cgroup")
		uid, id, ok := slurm.JobOfCgroup(string(cg))
		if !ok || uid != int(jobUser.uid) {
			t.Fatalf("the task on %s is in no job of %s:\n%s", n, jobUser.name, cg)
		}
		j, err := scontrol.Show(context.Background(), "", emu.SlurmConf(c.name), id, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := slurm.Check(j, uid, id, n); err != nil {
			t.Errorf("the task on %s: %v", n, err)
		}
		other := "n1"
		if n == other {
			other = "n2"
		}
		if err := slurm.Check(j, uid, id, other); err == nil {
			t.Errorf("job %s on %s passed the check on %s", id, n, other)
		}
		if id != array {
			job, node, name = id, n, j.Name()
		}
	}
	sleeper := exec.Command("sleep", "600")
	sleeper.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: jobUser.uid, Gid: jobUser.gid}}
	if err := sleeper.Start(); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() { ended <- sleeper.Wait() }()
	t.Cleanup(func() { _ = sleeper.Process.Kill() })
	for _, h := range []string{"freezer", "memory", "cpuacct"} {
		root := filepath.Join("/sys/fs/cgroup", h, "roam", c.name, node, "slurm_"+node)
		procs := filepath.Join(slurm.ExternDir(root, int(jobUser.uid), job), "cgroup.procs")
		if err := os.WriteFile(procs, []byte(strconv.Itoa(sleeper.Process.Pid)), 0); err != nil {
			t.Fatalf("adopt into job %s's extern step: %v", job, err)
		}
	}
	if out, err := c.slurmCmd(jobUser, "scancel", name).CombinedOutput(); err != nil {
		t.Fatalf("scancel %s: %v: %s", job, err, out)
	}
	select {
	case <-ended:
	case <-time.After(30 * time.Second):
		t.Fatalf("a process adopted into job %s's extern step outlived scancel by 30s", job)
	}
	return job
}

// usedCPU reports whether sacct's TotalCPU ([DD-[HH:]]MM:SS.mmm) is
// a tenth of a second or more: each task burnt one second of its node's.
func usedCPU(s string) bool {
	i := strings.LastIndex(s, ":")
	sec, err := strconv.ParseFloat(s[i+1:], 64)
	return err == nil && (sec >= 0.1 || strings.Trim(s[:max(i, 0)], "0:-") != "")
}

// listensOnlyInNodes checks that no Slurm or database port is open on this
// machine's own addresses: Slurm's daemons listen in node 1's namespace.
func listensOnlyInNodes(t *testing.T) {
	t.Helper()
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(l)
		if len(f) < 4 || f[3] != "0A" { // LISTEN
			continue
		}
		_, port, _ := strings.Cut(f[1], ":")
		for _, p := range []string{"1AA1", "1AA2", "1AA3", "0CEA"} { // 6817-6819, 3306
			if port == p {
				t.Errorf("this machine listens on %s (port 0x%s): a Slurm daemon outside the nodes' namespaces", f[1], p)
			}
		}
	}
}
