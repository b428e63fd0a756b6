package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"roam/internal/api"
	"roam/internal/ckpt"
)

// times drops what differs between two runs of a deterministic workload:
// the CPU and elapsed seconds on its last line.
var times = regexp.MustCompile(` cpu=[0-9.]+ elapsed=[0-9.]+`)

func sameRun(s string) string { return times.ReplaceAllString(s, "") }

// A job checkpointed with roam checkpoint, killed, and restarted from the
// file on another node ends as an unbroken run of it does: the same
// output (checked whole with roam logs), the same exit status. Its record
// keeps the restart with the checkpoint's output offsets, and the attached
// roam restart prints the part after them. For burn (progress lines),
// mgs and dkg (a tree of processes), each on real CRIU. Also: the file is
// its owner's alone; it is refused while the job runs, when changed, and
// when a file the job had open is gone (named).
func TestCheckpointRestart(t *testing.T) {
	c := upCluster(t, "e2eckpt", 41, "--nodes", "3", "--scheduler", "static")
	c.waitAllAlive(3)
	// The job user's jobs, checkpointed and restarted by that user.
	dir := userDir(t)
	progs := []struct {
		name string
		argv []string
	}{
		{"burn", []string{workload(t, "burn"), "4", "8"}},
		{"mgs", []string{workload(t, "mgs"), "300", "200", "7"}},
		{"dkg", []string{workload(t, "dkg"), "-k", "300", "-n", "2", "-b", "1024", "-s", "3"}},
	}
	unbroken := map[string]string{}
	for _, p := range progs {
		unbroken[p.name] = c.start("1", p.argv...)
	}
	for _, p := range progs {
		id := c.start("2", p.argv...)
		waitFor(t, time.Minute, id+" has run 1 CPU-second", func() (bool, string) {
			j, ok := c.lookup(id)
			return ok && j.CPUSeconds >= 1, fmt.Sprint(j.CPUSeconds)
		})
		file := filepath.Join(dir, p.name+".roamckpt")
		c.mustRunAs(jobUser, "--node", "1", "checkpoint", id, "-o", file)
		// Once roam checkpoint has returned, the job's record has it.
		if j, ok := c.lookup(id); !ok || len(j.Checkpoints) != 1 || !j.Checkpoints[0].OK {
			t.Fatalf("%s: right after roam checkpoint, the record's checkpoints are %+v", p.name, j.Checkpoints)
		}
		fi, err := os.Stat(file)
		if err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: checkpoint file %v, %v; want mode 0600", p.name, fi, err)
		}
		if out, err := c.roamAs(jobUser, "--node", "1", "restart", file).CombinedOutput(); err == nil || !strings.Contains(string(out), "still running") {
			t.Fatalf("%s: restarted while it runs: %v: %s", p.name, err, out)
		}
		// Killed by its user: a job root killed is not restarted.
		c.mustRunAs(jobUser, "--node", "1", "kill", "-s", "KILL", id)
		if j := c.waitFinished(id, 30*time.Second); j.ExitCode == nil || *j.ExitCode != 137 {
			t.Fatalf("%s killed: %+v", p.name, j)
		}
		if p.name == "burn" {
			b, _ := os.ReadFile(file)
			b[len(b)/2] ^= 1
			bad := filepath.Join(dir, "changed.roamckpt")
			if err := os.WriteFile(bad, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(bad, int(jobUser.uid), int(jobUser.gid)); err != nil {
				t.Fatal(err)
			}
			if out, err := c.roamAs(jobUser, "--node", "1", "restart", bad).CombinedOutput(); err == nil || !strings.Contains(string(out), "seal does not match") {
				t.Fatalf("a changed checkpoint: %v: %s", err, out)
			}
		}
		cmd := c.roamAs(jobUser, "--node", "1", "restart", file, "--on", "3")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		code := exitCodeOf(cmd.Run())
		j0 := c.waitFinished(unbroken[p.name], 2*time.Minute)
		j := c.waitFinished(id, 2*time.Minute)
		if j.ExitCode == nil || j0.ExitCode == nil || *j.ExitCode != *j0.ExitCode || code != *j0.ExitCode || j.Node != "3" {
			t.Fatalf("%s: restarted %+v (roam restart exited %d: %s), unbroken %+v", p.name, j, code, stderr.String(), j0)
		}
		want := c.mustRun("--node", "1", "logs", unbroken[p.name])
		got := c.mustRun("--node", "1", "logs", id)
		if sameRun(got) != sameRun(want) || want == "" {
			t.Fatalf("%s: output after the restart:\n%s\nunbroken:\n%s", p.name, got, want)
		}
		if len(j.Restarts) != 1 || len(j.Checkpoints) != 1 || j.Restarts[0].Out != j.Checkpoints[0].Out || j.Restarts[0].CheckpointNode != "2" {
			t.Fatalf("%s: restarts %+v, checkpoints %+v", p.name, j.Restarts, j.Checkpoints)
		}
		if after := got[j.Restarts[0].Out:]; sameRun(stdout.String()) != sameRun(after) {
			t.Fatalf("%s: roam restart printed %q, want the output after the checkpoint %q", p.name, stdout.String(), after)
		}
		t.Logf("%s: checkpoint froze it %.0f ms, %d bytes, %d bytes of output before it; same result and exit status %d",
			p.name, j.Checkpoints[0].FreezeMS, j.Checkpoints[0].Bytes, j.Restarts[0].Out, code)
	}

	// A file the job has open (its program) gone: the restart names it.
	gone := filepath.Join(binDir, "burn-gone")
	if out, err := exec.Command("cp", workload(t, "burn"), gone).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
	defer os.Remove(gone)
	id := c.start("2", gone, "30", "2")
	waitFor(t, time.Minute, id+" runs", func() (bool, string) {
		j, ok := c.lookup(id)
		return ok && j.CPUSeconds > 0.2, ""
	})
	file := filepath.Join(dir, "gone.roamckpt")
	c.mustRunAs(jobUser, "--node", "1", "checkpoint", "--stop", id, "-o", file)
	if j := c.waitFinished(id, 30*time.Second); !strings.Contains(j.EndReason, "checkpoint") {
		t.Fatalf("checkpoint --stop: %+v", j)
	}
	os.Remove(gone)
	out, err := c.roamAs(jobUser, "--node", "1", "restart", file).CombinedOutput()
	if err == nil || !strings.Contains(string(out), gone) {
		t.Fatalf("restart with its program gone: %v: %s", err, out)
	}
	if j, _ := c.lookup(id); j.State != api.StateFinished {
		t.Fatalf("after a refused restart: %+v", j)
	}
	t.Logf("program gone: %s", strings.TrimSpace(string(out)))
}

// 8 jobs with --checkpoint-every 5s on 4 nodes (fence 3s,6s,2s); node
// 4's link is cut while they run, its agent left running. It kills its
// copies (fence.kill), and only then are its jobs restarted from their
// checkpoints elsewhere, within kill + margin + two sweeps of the home;
// the attached roam run says so and goes on, and all 8 end as unbroken
// runs do. When the link comes back, nothing the old copies wrote or
// their exit status is taken.
func TestRestartAfterNodeLoss(t *testing.T) {
	c := upCluster(t, "e2erest", 42, "--nodes", "4", "--scheduler", "static", "--fence", "3s,6s,2s")
	c.waitAllAlive(4)
	burn := workload(t, "burn")
	run := c.roamCmd("--node", "1", "run", "-n", "8", "--no-prefix", "--checkpoint-every", "5s", "--", burn, "10", "10")
	var rout, rerr bytes.Buffer
	run.Stdout, run.Stderr = &rout, &rerr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	var victims []string
	waitFor(t, time.Minute, "node 4's jobs checkpointed", func() (bool, string) {
		victims = victims[:0]
		js := c.ps("1")
		ready := len(js) == 8
		for _, j := range js {
			if j.Node != "4" {
				continue
			}
			victims = append(victims, j.ID)
			kept := false
			for _, k := range j.Checkpoints {
				kept = kept || (k.OK && k.StoredOn != "" && k.StoredOn != "4")
			}
			ready = ready && kept
		}
		return ready && len(victims) > 0, fmt.Sprint(victims)
	})
	c.mustRun("cluster", "link", "4", "down")
	cut := time.Now()
	var detect time.Duration
	waitFor(t, 30*time.Second, "node 1 declares node 4 dead", func() (bool, string) {
		n := find(c.nodes("1"), "4")
		detect = time.Since(cut)
		return n != nil && !n.Alive, ""
	})
	waitFor(t, time.Minute, "node 4's jobs restarted elsewhere", func() (bool, string) {
		for _, id := range victims {
			j, ok := c.lookup(id)
			if !ok || j.State != api.StateRunning || j.Node == "4" || len(j.Restarts) != 1 {
				return false, fmt.Sprintf("%s %s on %s", id, j.State, j.Node)
			}
		}
		return true, ""
	})
	took := time.Since(cut)
	t.Logf("%d jobs of node 4; failure detection %v; restarted elsewhere %v after the cut", len(victims), detect.Round(time.Millisecond), took.Round(time.Millisecond))
	if took > 6*time.Second+2*time.Second+10*time.Second {
		t.Errorf("restarted %v after the cut: past kill + margin + two sweeps", took)
	}
	old := func() []int {
		var pids []int
		for pid, spool := range ckpt.Inits() {
			if strings.Contains(spool, "/clusters/"+c.name+"/n4/") {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	if pids := old(); len(pids) != 0 {
		t.Fatalf("old copies %v run on node 4 after their restart elsewhere: its fence did not kill them", pids)
	}
	c.mustRun("cluster", "link", "4", "up")
	if err := run.Wait(); err != nil {
		t.Fatalf("roam run: %v\n%s", err, rerr.String())
	}
	for _, id := range victims {
		if !strings.Contains(rerr.String(), "roam: "+id+" restarted from the checkpoint of ") {
			t.Errorf("roam run did not say %s was restarted:\n%s", id, rerr.String())
		}
	}
	want, err := exec.Command(burn, "0.01", "10").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range c.ps("1") {
		got := c.mustRun("--node", "1", "logs", j.ID)
		if j.State != api.StateFinished || j.ExitCode == nil || *j.ExitCode != 0 || j.Node == "4" || sameRun(got) != sameRun(string(want)) {
			t.Errorf("%s: %s exit %v on %s, output:\n%s", j.ID, j.State, j.ExitCode, j.Node, got)
		}
	}
}
