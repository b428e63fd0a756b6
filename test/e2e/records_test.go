package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"roam/internal/api"
	"roam/internal/ckpt"
	"roam/internal/emu"
)

// recordsHWM bounds the agent's peak resident memory (VmHWM) after its
// restart with a user's records at the 64 MiB budget and a roam ps of
// them: the records in its heap (twice that at the collector's peak),
// its job table mapped (on tmpfs here, so resident), its own 30-odd MiB
// and the answer's copies. 206 MiB measured. Without the budget and the
// arguments kept once, the runs it took would be 28 x 128 x 1.9 MiB,
// 6.6 GiB, read back at every start.
const recordsHWM = 320 << 20

// vmHWM is process pid's peak resident memory, in bytes.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}

// 80 runs of 128 jobs with 1.9 MiB of arguments each, from one non-root
// user (issue 44), against a real agent with the default budget: each
// run's arguments are kept once; the runs past the records budget are
// refused, naming it; the agent, restarted, takes the records back in
// bounded memory (its peak measured), and roam ps answers.
func TestRecordsBudget(t *testing.T) {
	c := upCluster(t, "e2erec", 80, "--nodes", "1")
	c.waitAllAlive(1)
	st, err := emu.Load(c.name)
	if err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(st.Nodes[0].Dir, "state.db")
	// 16 arguments of 118.75 KiB (one argument may have 128 KiB): 1.9 MiB.
	run := []string{"--node", "1", "run", "-d", "-n", "128", "--max-running", "1", "--", "sh", "-c", "exec sleep 3600", "sh"}
	for range 16 {
		run = append(run, strings.Repeat("r", 121600))
	}
	accepted, refused := 0, 0
	for i := range 80 {
		out, err := c.roamAs(jobUser, run...).CombinedOutput()
		if err != nil {
			if !strings.Contains(string(out), "records budget of user 70701") {
				t.Fatalf("run %d: %v: %.300s", i, err, out)
			}
			refused++
			continue
		}
		accepted++
		if fi, _ := os.Stat(db); accepted == 1 && fi != nil && fi.Size() > 32<<20 {
			t.Fatalf("one run of 128 jobs made the job table %d MiB: its arguments are not kept once", fi.Size()>>20)
		}
		if accepted > 40 {
			t.Fatalf("%d runs accepted: no records budget", accepted)
		}
	}
	if refused == 0 {
		t.Fatal("no run refused")
	}
	t.Logf("%d runs accepted, %d refused at the records budget", accepted, refused)

	// A service manager's restart of the agent.
	if err := syscall.Kill(c.status().Nodes[0].PID, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, "the agent gone", func() (bool, string) { return c.status().Nodes[0].State == "down", "" })
	c.mustRun("cluster", "start", "1")
	waitFor(t, 30*time.Second, "the agent up", func() (bool, string) { return c.status().Nodes[0].State == "up", "" })
	var js []api.Job
	waitFor(t, time.Minute, "roam ps answers", func() (bool, string) {
		out, err := c.roamAs(jobUser, "--node", "1", "ps", "--json").Output()
		if err != nil {
			return false, string(out)
		}
		return json.Unmarshal(out, &js) == nil && len(js) == accepted*128, strconv.Itoa(len(js))
	})
	for _, j := range js {
		if !j.CmdCut || len(j.Cmd) > 1<<10 {
			t.Fatalf("roam ps lists job %s with a command of %d bytes", j.ID, len(j.Cmd))
		}
	}
	hwm := vmHWM(t, c.status().Nodes[0].PID)
	t.Logf("the agent's peak memory after its restart and a roam ps of %d jobs: %d MiB", len(js), hwm>>20)
	if hwm > recordsHWM {
		t.Fatalf("the agent's peak memory after its restart is %d MiB, past %d MiB", hwm>>20, recordsHWM>>20)
	}
	// The whole command line of a job asked by id, from its record.
	var one []api.Job
	out := c.mustRunAs(jobUser, "--node", "1", "ps", "--json", js[0].ID)
	if err := json.Unmarshal([]byte(out), &one); err != nil || len(one) != 1 || one[0].CmdCut || len(one[0].Cmd) < 1900<<10 {
		t.Fatalf("roam ps %s: %d jobs, %v", js[0].ID, len(one), err)
	}
}

// TestAFloodOfOutputMeetsItsBudgets: 100 jobs of one user writing output
// as fast as they can, on nodes whose state directories are small tmpfs
// of their own, are killed at the output budgets (or the disk's reserve)
// before a state directory fills, and another user's job on the home
// runs on and reports all its output. The nodes have 0.2 CPU each: their
// jobs write some 200 MB/s to tmpfs, so the reserve covers half a second
// in which the agent gets no CPU (a loaded 2-core machine gave stalls of
// a quarter second); a node of a whole core filled it in a tenth.
func TestAFloodOfOutputMeetsItsBudgets(t *testing.T) {
	const stateMB = 384
	cfg := filepath.Join(t.TempDir(), "agent.yaml")
	limits := "limits:\n  output_bytes: 8388608\n  output_bytes_per_user: 16777216\n  disk_reserve_bytes: 134217728\n"
	if err := os.WriteFile(cfg, []byte(limits), 0o644); err != nil {
		t.Fatal(err)
	}
	c := upCluster(t, "e2eflood", 87, "--nodes", "2", "--cpu", "0.2,0.2", "--state-mb", strconv.Itoa(stateMB), "--agent-config", cfg)
	c.waitAllAlive(2)
	st, err := emu.Load(c.name)
	if err != nil {
		t.Fatal(err)
	}
	// The least each node's state directory had free, sampled until the
	// flood is over.
	least := make([]int64, len(st.Nodes))
	stop, sampled := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(sampled)
		for i := range least {
			least[i] = stateMB << 20
		}
		for {
			for i, n := range st.Nodes {
				var fs syscall.Statfs_t
				if syscall.Statfs(n.Dir, &fs) == nil {
					least[i] = min(least[i], int64(fs.Bavail)*fs.Bsize)
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	uid, gid := ensureUser(t, "roamtest2")
	other := owner{name: "roamtest2", uid: uid, gid: gid, groups: []uint32{gid}}
	talker := c.startAs(other, "1", "sh", "-c", `i=0; while [ $i -lt 100 ]; do echo "line $i"; i=$((i+1)); sleep 0.05; done`)
	// The first flood writes from its start: its run is refused when a
	// node's disk fell below its reserve while it started the jobs (the
	// run then ends those it started), or taken. The second's jobs start
	// writing a second after their start, once all run.
	yes := []string{"yes", strings.Repeat("flood", 20)}
	for _, argv := range [][]string{yes, append([]string{"sh", "-c", `sleep 1; exec "$@"`, "sh"}, yes...)} {
		refused, why := floodOnce(t, c, talker, argv)
		t.Logf("%s: refused %v; its jobs ended at %v", argv[0], refused, why)
	}
	j := c.waitFinished(talker, time.Minute)
	close(stop)
	<-sampled
	if j.ExitCode == nil || *j.ExitCode != 0 || j.EndReason != "" {
		t.Errorf("the other user's job ended %v %q", j.ExitCode, j.EndReason)
	}
	logs := c.mustRunAs(other, "--node", "1", "logs", talker)
	for i := range 100 {
		if !strings.Contains(logs, fmt.Sprintf("line %d\n", i)) {
			t.Fatalf("the other user's output lacks line %d: %.300s", i, logs)
		}
	}
	for i, n := range st.Nodes {
		t.Logf("node %s: least free %d MiB of %d", n.ID, least[i]>>20, stateMB)
		if least[i] <= 0 {
			t.Errorf("node %s's state directory filled", n.ID)
		}
		if b, _ := os.ReadFile(filepath.Join(n.Dir, "roamd.log")); bytes.Contains(b, []byte("no space left")) {
			t.Errorf("node %s's agent met a full disk", n.ID)
		}
	}
}

// livingJobs counts the jobs running in cluster name, but job but.
func livingJobs(name, but string) int {
	n := 0
	for pid, spool := range ckpt.Inits() {
		if c, ok := emuCluster(spool); ok && c == name && !strings.HasSuffix(spool, "/spool/"+but) && live(pid) {
			n++
		}
	}
	return n
}

// floodOnce runs 100 jobs of argv as jobUser from node 1 and waits until
// none runs: refused says the run was refused at the disk's reserve, why
// counts the budgets its jobs ended at. A job that ended otherwise fails
// the test.
func floodOnce(t *testing.T, c *cluster, talker string, argv []string) (refused bool, why map[string]int) {
	t.Helper()
	cmd := c.roamAs(jobUser, append([]string{"--node", "1", "run", "-d", "-n", "100", "--"}, argv...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if refused = err != nil; refused && !strings.Contains(stderr.String(), "(limits.disk_reserve_bytes)") {
		t.Fatalf("run -n 100: %v: %s", err, stderr.String())
	}
	ids := map[string]bool{}
	for _, id := range strings.Fields(string(out)) {
		ids[id] = !refused
	}
	if !refused && len(ids) != 100 {
		t.Fatalf("run -n 100 -d printed %d ids: %.200s", len(ids), out)
	}
	var ended []api.Job
	waitFor(t, 3*time.Minute, "every flooding job ended", func() (bool, string) {
		ended = ended[:0]
		states := map[string]int{}
		for _, j := range c.ps("1") {
			if ids[j.ID] {
				states[j.State+" on "+j.Node]++
			}
			if ids[j.ID] && j.State == "finished" {
				ended = append(ended, j)
			}
		}
		left := livingJobs(c.name, talker)
		return left == 0 && (refused || len(ended) == 100), fmt.Sprintf("%v, %d running", states, left)
	})
	why = map[string]int{}
	for _, j := range ended {
		switch {
		case strings.Contains(j.EndReason, "(limits.output_bytes_per_user)"):
			why["output_bytes_per_user"]++
		case strings.Contains(j.EndReason, "(limits.output_bytes)"):
			why["output_bytes"]++
		case strings.Contains(j.EndReason, "(limits.disk_reserve_bytes)"):
			why["disk_reserve_bytes"]++
		default:
			t.Errorf("flooding job %s ended %q (exit %s), not at a budget", j.ID, j.EndReason, exitText(j))
		}
	}
	return refused, why
}
