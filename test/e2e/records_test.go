package e2e

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"roam/internal/api"
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
