package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"roam/internal/api"
	"roam/internal/carry"
)

// carrySeconds is each job's CPU time: at the nodes' 0.25 CPU it needs
// 180 s of its node, three times the allocations' time limit (1 minute,
// Slurm's least).
const carrySeconds = "45"

// TestSlurmSweepCarriedAcrossAllocations (long) submits, as a user, an
// sbatch script on 3 of the 4 nodes with a time limit of 1 minute whose
// `roam run --carry DIR -n 3` runs jobs that each need 3 minutes of their
// node, and that submits itself again while DIR holds a checkpoint: the
// sweep finishes over successive allocations, each job's output counts
// up once, with no line missing or repeated, and is the same as an
// unbroken run's of the same program beside it (on the fourth node,
// outside Slurm); no job ever runs on two nodes at once, and each runs in
// its allocation's Slurm job.
func TestSlurmSweepCarriedAcrossAllocations(t *testing.T) {
	long(t)
	needSlurm(t)
	c := upCluster(t, "carry", 97, "--nodes", "4", "--cpu", "0.25", "--slurm")
	dir := sharedDir(t, "carry-")
	if err := os.Chown(dir, int(jobUser.uid), int(jobUser.gid)); err != nil {
		t.Fatal(err)
	}
	carryDir := filepath.Join(dir, "carry")
	if err := os.Mkdir(carryDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(carryDir, int(jobUser.uid), int(jobUser.gid)); err != nil {
		t.Fatal(err)
	}
	burn, roam := workload(t, "burn"), filepath.Join(binDir, "roam")
	script := `#!/bin/sh
#SBATCH --time=1
#SBATCH --nodelist=n1,n2,n3
#SBATCH -o ` + dir + `/slurm-%j.out
export ROAM_CLUSTER=` + c.name + `
` + roam + ` --node "${SLURMD_NODENAME#n}" run --carry ` + carryDir + ` --carry-margin 20s -n 3 --output '` + dir + `/out-%a' -- ` + burn + ` ` + carrySeconds + ` 60
if ls ` + carryDir + `/*.roamckpt >/dev/null 2>&1; then sbatch ` + dir + `/job.sh; fi
`
	if err := os.WriteFile(filepath.Join(dir, "job.sh"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.slurmCmd(jobUser, "scancel", "-u", jobUser.name).Run() })
	// The unbroken run: the same program, on the fourth node, outside
	// Slurm, at the same share of a node.
	plain := c.roamAs(jobUser, "--node", "4", "run", "--no-slurm", "--on", "4", "--output", filepath.Join(dir, "plain"), "--", burn, carrySeconds, "60")
	if err := plain.Start(); err != nil {
		t.Fatal(err)
	}
	plainDone := make(chan error, 1)
	go func() { plainDone <- plain.Wait() }()
	if out, err := c.slurmCmd(jobUser, "sbatch", filepath.Join(dir, "job.sh")).CombinedOutput(); err != nil {
		t.Fatalf("sbatch: %v: %s", err, out)
	}

	twice := watchTwice(t, c.name)
	logs := func() string {
		var b strings.Builder
		files, _ := filepath.Glob(filepath.Join(dir, "slurm-*.out"))
		for _, f := range files {
			out, _ := os.ReadFile(f)
			fmt.Fprintf(&b, "%s:\n%s\n", filepath.Base(f), out)
		}
		return b.String()
	}
	var st carry.State
	waitFor(t, 25*time.Minute, "the carried sweep done", func() (bool, string) {
		b, _ := os.ReadFile(filepath.Join(carryDir, carry.StateFile))
		st = carry.State{}
		_ = json.Unmarshal(b, &st)
		left, _ := filepath.Glob(filepath.Join(carryDir, "*.roamckpt"))
		q, _ := c.slurmCmd(jobUser, "squeue", "-h", "-u", jobUser.name).CombinedOutput()
		return st.Sweep != "" && len(left) == 0 && len(strings.TrimSpace(string(q))) == 0,
			fmt.Sprintf("state %s, checkpoints %v, queue %s\n%s", b, left, q, logs())
	})
	if err := <-plainDone; err != nil {
		t.Fatalf("the unbroken run: %v", err)
	}
	if n := twice(); n != "" {
		var moves strings.Builder
		for _, j := range c.ps("1") {
			for _, m := range j.MigrationLog {
				fmt.Fprintf(&moves, "%s: %+v\n", j.ID, m)
			}
			for _, r := range j.Restarts {
				fmt.Fprintf(&moves, "%s: restart %+v\n", j.ID, r)
			}
		}
		t.Errorf("a job ran twice: %s\nits moves and restarts:\n%s\n%s", n, moves.String(), logs())
	}
	if len(st.Allocations) < 3 {
		t.Errorf("the sweep took %d allocations (%v), want 3 or more: its jobs need three of them", len(st.Allocations), st.Allocations)
	}
	want := burnLines(t, filepath.Join(dir, "plain"))
	for i := range 3 {
		got := burnLines(t, filepath.Join(dir, fmt.Sprintf("out-%d", i)))
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("index %d's output is not the unbroken run's:\n%s\nwant:\n%s\n%s", i, strings.Join(got, "\n"), strings.Join(want, "\n"), logs())
		}
	}
	// The home says every job ended with 0, each restarted once an
	// allocation after the first at most.
	for _, j := range c.ps("1") {
		if j.Sweep != st.Sweep {
			continue
		}
		if j.State != api.StateFinished || j.ExitCode == nil || *j.ExitCode != 0 || len(j.Restarts) == 0 || len(j.Restarts) >= len(st.Allocations) {
			t.Errorf("job %s: %s, exit %s, %d restarts in %d allocations", j.ID, j.State, exitText(j), len(j.Restarts), len(st.Allocations))
		}
	}
	t.Logf("the sweep took %d allocations: %v", len(st.Allocations), st.Allocations)
}

func exitText(j api.Job) string {
	if j.ExitCode == nil {
		return "none"
	}
	return fmt.Sprint(*j.ExitCode)
}

// runningAgain reads the processes pids (pid: node) again and counts
// the nodes where one still runs (R or S) and is not dying: a moved
// job's source copy, stopped, is killed once the destination runs, and
// runs (R) to its end, which a node's CPU quota can hold up for a while.
func runningAgain(pids map[string]string) int {
	nodes := map[string]bool{}
	for pid, node := range pids {
		stat, _ := os.ReadFile(filepath.Join("/proc", pid, "stat"))
		i := strings.LastIndexByte(string(stat), ')')
		if i >= 0 && i+2 < len(stat) && (stat[i+2] == 'R' || stat[i+2] == 'S') && !dying(pid, string(stat[i+2:])) {
			nodes[node] = true
		}
	}
	return len(nodes)
}

// dying says whether process pid, whose /proc/PID/stat past its name is
// rest, exits or has SIGKILL pending.
func dying(pid, rest string) bool {
	const pfExiting = 0x4
	if f := strings.Fields(rest); len(f) > 6 {
		if flags, err := strconv.ParseUint(f[6], 10, 64); err == nil && flags&pfExiting != 0 {
			return true
		}
	}
	status, _ := os.ReadFile(filepath.Join("/proc", pid, "status"))
	for _, l := range strings.Split(string(status), "\n") {
		k, v, _ := strings.Cut(l, ":")
		if k != "SigPnd" && k != "ShdPnd" {
			continue
		}
		if mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && mask&(1<<(9-1)) != 0 {
			return true
		}
	}
	return false
}

// burnLines are burn's output lines, with the times of its last masked
// (the lines before it count up 1/61 to 60/61, each once, in order).
func burnLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "burn: done ") {
			lines[i] = "burn: done"
		} else if want := fmt.Sprintf("burn: %d/61", i+1); l != want {
			t.Errorf("%s: line %d is %q, want %q", path, i+1, l, want)
		}
	}
	return lines
}

// watchTwice watches, until the test ends, the processes of cluster
// name's jobs from /proc: a job whose program (burn; not roam-init, nor
// a CRIU the agent runs in the job's groups while it moves) runs (R or S,
// neither stopped nor frozen) on two nodes at once ran twice, and so does
// one outside a Slurm job's extern step. The function it returns says
// what was seen of that ("" nothing).
func watchTwice(t *testing.T, name string) func() string {
	group := regexp.MustCompile(`:pids:/roam/` + name + `/(n[0-9]+)/jobs/([^/\n]+)`)
	slurmJobOf := regexp.MustCompile(`:freezer:/roam/` + name + `/n[0-9]+/slurm_n[0-9]+/uid_[0-9]+/job_([0-9]+)/`)
	extern := regexp.MustCompile(`:freezer:/roam/` + name + `/(n[0-9]+)/slurm_n[0-9]+/uid_[0-9]+/job_[0-9]+/step_extern\n`)
	var mu sync.Mutex
	var seen []string
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		for {
			on := map[string]map[string]string{}
			pids := map[string]map[string]string{} // job: pid: node
			ents, _ := os.ReadDir("/proc")
			for _, e := range ents {
				cg, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup"))
				m := group.FindSubmatch(cg)
				stat, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
				i := strings.LastIndexByte(string(stat), ')')
				if err != nil || m == nil || i < 0 || i+2 >= len(stat) || (stat[i+2] != 'R' && stat[i+2] != 'S') || !strings.Contains(string(stat[:i]), "(burn") {
					continue
				}
				node, id := string(m[1]), string(m[2])
				if x := extern.FindSubmatch(cg); x == nil || string(x[1]) != node {
					if !strings.HasPrefix(id, "4.") { // the unbroken run's, on n4
						mu.Lock()
						seen = append(seen, fmt.Sprintf("pid %s of job %s on %s outside a Slurm job's extern step there:\n%s", e.Name(), id, node, cg))
						mu.Unlock()
					}
				}
				if on[id] == nil {
					on[id] = map[string]string{}
				}
				slurmJob := ""
				if x := slurmJobOf.FindSubmatch(cg); x != nil {
					slurmJob = string(x[1])
				}
				on[id][node] += fmt.Sprintf(" pid %s (Slurm job %s): %s", e.Name(), slurmJob, stat[:min(len(stat), i+4)])
				if pids[id] == nil {
					pids[id] = map[string]string{}
				}
				pids[id][e.Name()] = node
			}
			for id, nodes := range on {
				// A scan of /proc takes a while: a job moved meanwhile
				// is seen on both nodes. Both copies read again at once
				// must both run.
				if len(nodes) > 1 && runningAgain(pids[id]) > 1 {
					mu.Lock()
					seen = append(seen, fmt.Sprintf("%s: job %s runs on %v at once", time.Now().Format(time.TimeOnly), id, nodes))
					mu.Unlock()
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}()
	return func() string {
		mu.Lock()
		defer mu.Unlock()
		return strings.Join(seen, "\n")
	}
}
