package e2e

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"roam/internal/api"
	"roam/internal/ckpt"
)

// jobInits lists the roam-init processes of cluster name's jobs (on any
// node) by pid, with their job id.
func jobInits(name string) map[int]string {
	out := map[int]string{}
	for pid, spool := range ckpt.Inits() {
		if strings.Contains(spool, "/clusters/"+name+"/") {
			out[pid] = filepath.Base(spool)
		}
	}
	return out
}

// Real hosts lose nodes. On 4 nodes:
//   - a roam run -n 8 whose start on one node hangs (its agent stopped)
//     fails, names that node, and leaves no job of it on any node, also
//     none that the stopped node starts once it resumes;
//   - a node cut off for 20 s with its jobs running: they are lost at the
//     home while it is away, running again once it is back, their output
//     complete and in order, their exit status once;
//   - an agent stopped with SIGTERM and started again: its 4 jobs ran on
//     and finish with their output and exit status;
//   - a node whose agent and jobs are killed and whose link is cut: its
//     jobs are lost at the home within twice the failure detection, the
//     attached roam run names them and exits 254, the other jobs finish.
func TestNodeLossPartitionAndHalfStart(t *testing.T) {
	c := upCluster(t, "e2eloss", 30, "--nodes", "4", "--scheduler", "static")
	c.waitAllAlive(4)
	st := c.status()

	// ---- half-started run ----
	if err := syscall.Kill(st.Nodes[1].PID, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	out, err := c.run("--node", "1", "run", "-d", "-n", "8", "--", "sleep", "300")
	syscall.Kill(st.Nodes[1].PID, syscall.SIGCONT)
	if err == nil || !strings.Contains(out, "node 2") {
		t.Fatalf("run -n 8 with node 2's agent stopped: %v: %s", err, out)
	}
	t.Logf("half-started run refused: %s", strings.TrimSpace(out))
	waitFor(t, 30*time.Second, "no job of the failed run on any node", func() (bool, string) {
		left := jobInits(c.name)
		return len(left) == 0, fmt.Sprint(left)
	})
	if js := c.ps("1", "-a"); len(js) != 0 {
		t.Fatalf("the failed run left records: %+v", js)
	}
	c.waitAllAlive(4)

	// ---- partition ----
	script := "for i in $(seq 1 40); do echo line $i; sleep 0.5; done; exit 5"
	ids := strings.Fields(c.mustRun("--node", "1", "run", "-d", "--pin", "-n", "2", "--on", "3", "--", "sh", "-c", script))
	c.waitLines(ids[0], 4)
	c.mustRun("cluster", "link", "3", "down")
	cut := time.Now()
	waitFor(t, 20*time.Second, "node 3's jobs lost at their home", func() (bool, string) {
		for _, j := range c.ps("1") {
			if j.State != api.StateLost || j.Node != "3" || j.LostAt.IsZero() {
				return false, fmt.Sprintf("%s %s on %s", j.ID, j.State, j.Node)
			}
		}
		return true, ""
	})
	t.Logf("lost %v after the cut", time.Since(cut).Round(time.Millisecond))
	time.Sleep(20*time.Second - time.Since(cut))
	c.mustRun("cluster", "link", "3", "up")
	back := time.Now()
	waitFor(t, 30*time.Second, "node 3's jobs running again", func() (bool, string) {
		for _, j := range c.ps("1") {
			if j.State == api.StateLost {
				return false, j.ID + " still lost"
			}
		}
		return true, ""
	})
	t.Logf("running again %v after the link came back", time.Since(back).Round(time.Millisecond))
	var want strings.Builder
	for i := 1; i <= 40; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	for _, id := range ids {
		j := c.waitFinished(id, time.Minute)
		if j.ExitCode == nil || *j.ExitCode != 5 || j.Node != "3" {
			t.Fatalf("%s after the partition: %+v", id, j)
		}
		if logs := c.mustRun("--node", "1", "logs", id); logs != want.String() {
			t.Fatalf("%s's output after the partition:\n%s", id, logs)
		}
	}
	lost, backs := 0, 0
	for _, e := range c.events("1") {
		switch e.Kind {
		case "lost":
			lost++
		case "back":
			backs++
		}
	}
	if lost != 2 || backs != 2 {
		t.Fatalf("events: %d lost, %d back; want 2 and 2", lost, backs)
	}

	// ---- agent restart ----
	// A service manager's restart: SIGTERM, then start again. The agent
	// leaves its 4 jobs (of this home) running and takes them back.
	restart := "for i in 1 2 3 4 5 6 7 8; do echo tick $i; sleep 0.5; done; exit 9"
	rids := strings.Fields(c.mustRun("--node", "3", "run", "-d", "--pin", "-n", "4", "--on", "3", "--", "sh", "-c", restart))
	c.waitLines(rids[3], 1)
	pid3 := c.status().Nodes[2].PID
	if err := syscall.Kill(pid3, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "node 3's agent gone", func() (bool, string) {
		return c.status().Nodes[2].State == "down", ""
	})
	inits := 0
	for _, id := range jobInits(c.name) {
		for _, r := range rids {
			if id == r {
				inits++
			}
		}
	}
	if inits != 4 {
		t.Fatalf("%d of the 4 jobs run on while their agent is stopped", inits)
	}
	c.mustRun("cluster", "start", "3")
	for _, id := range rids {
		j := c.waitFinished(id, time.Minute)
		if j.ExitCode == nil || *j.ExitCode != 9 {
			t.Fatalf("%s after the agent's restart: %+v", id, j)
		}
		if logs := c.mustRun("--node", "3", "logs", id); logs != "tick 1\ntick 2\ntick 3\ntick 4\ntick 5\ntick 6\ntick 7\ntick 8\n" {
			t.Fatalf("%s's output after the agent's restart: %q", id, logs)
		}
	}

	// ---- node loss ----
	c.waitAllAlive(4)
	others := strings.Fields(c.mustRun("--node", "1", "run", "-d", "--pin", "-n", "2", "--on", "2", "--", "sh", "-c", "sleep 8; echo done"))
	attached := c.roamCmd("--node", "1", "run", "--pin", "-n", "2", "--on", "4", "--", "sh", "-c", "echo up; sleep 120")
	var aout, aerr bytes.Buffer
	attached.Stdout, attached.Stderr = &aout, &aerr
	if err := attached.Start(); err != nil {
		t.Fatal(err)
	}
	var doomed []string
	waitFor(t, 15*time.Second, "2 jobs running on node 4", func() (bool, string) {
		doomed = doomed[:0]
		for _, j := range c.ps("1") {
			if j.Node == "4" && j.State == api.StateRunning {
				doomed = append(doomed, j.ID)
			}
		}
		return len(doomed) == 2, fmt.Sprint(doomed)
	})
	victims := []int{st.Nodes[3].PID}
	for pid, id := range jobInits(c.name) {
		if id == doomed[0] || id == doomed[1] {
			victims = append(victims, pid)
		}
	}
	if len(victims) != 3 {
		t.Fatalf("node 4's agent and jobs: %v", victims)
	}
	c.mustRun("cluster", "link", "4", "down")
	for _, p := range victims {
		syscall.Kill(p, syscall.SIGKILL)
	}
	killed := time.Now()
	var detect time.Duration
	waitFor(t, 30*time.Second, "node 1 declares node 4 dead", func() (bool, string) {
		n := find(c.nodes("1"), "4")
		detect = time.Since(killed)
		return n != nil && !n.Alive, ""
	})
	waitFor(t, 2*detect+time.Second, "node 4's jobs lost", func() (bool, string) {
		for _, j := range c.ps("1") {
			if j.Node == "4" && j.State != api.StateLost {
				return false, j.ID + " " + j.State
			}
		}
		return true, ""
	})
	t.Logf("failure detection %v; lost within %v of the kill", detect.Round(time.Millisecond), time.Since(killed).Round(time.Millisecond))
	if code := exitCodeOf(attached.Wait()); code != api.ExitLost {
		t.Fatalf("the attached run exited %d, want %d; stderr: %s", code, api.ExitLost, aerr.String())
	}
	for _, id := range doomed {
		if !strings.Contains(aerr.String(), id+" lost: node 4") {
			t.Fatalf("the attached run does not name %s on node 4:\n%s", id, aerr.String())
		}
	}
	for _, id := range others {
		if j := c.waitFinished(id, time.Minute); j.ExitCode == nil || *j.ExitCode != 0 {
			t.Fatalf("a job of node 2: %+v", j)
		}
	}
}
