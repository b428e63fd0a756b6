package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"roam/internal/api"
)

// counts reads a file of lines "N", one a write, as its numbers.
func counts(t *testing.T, path string) []int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		n, err := strconv.Atoi(l)
		if err != nil {
			continue // a line cut by the kill
		}
		out = append(out, n)
	}
	return out
}

// Fencing on real agents (3 nodes, fence 3s,6s,2s): a job of the job
// user's with a kept checkpoint on node 2 appends numbered lines to a
// file all nodes share; node 2's link is cut while the file stays
// writable from it. Node 2 stops, then kills its copy before node 1
// restarts the job elsewhere from its checkpoint, within kill + margin +
// a sweep, and the file shows it: the numbers rise by one, fall back once
// to the checkpoint's (the restored copy's first line, after the old
// copy's last), and rise by one to the end: the two copies never
// interleave. A job without a checkpoint on node 2 writes on through the
// cut, is running again at its home once the link is back, and ends 0.
func TestFenceCutNode(t *testing.T) {
	c := upCluster(t, "e2efence", 85, "--nodes", "3", "--scheduler", "static", "--fence", "3s,6s,2s")
	c.waitAllAlive(3)
	t.Cleanup(func() {
		if t.Failed() {
			for _, n := range []string{"n1", "n2", "n3"} {
				b, _ := os.ReadFile("/run/roam/clusters/e2efence/" + n + "/roamd.log")
				os.WriteFile("/tmp/i45-"+n+".log", b, 0o644)
			}
		}
	})
	dir := userDir(t)
	fenced, free := filepath.Join(dir, "fenced"), filepath.Join(dir, "free")
	loop := `n=0; while [ $n -lt %d ]; do n=$((n+1)); echo $n >> %s; sleep 0.1; done`
	fid := c.start("2", "--checkpoint-every", "2s", "--", "sh", "-c", fmt.Sprintf(loop, 1000000, fenced))
	pid := c.start("2", "--", "sh", "-c", fmt.Sprintf(loop, 300, free))
	waitFor(t, time.Minute, "a checkpoint kept off node 2", func() (bool, string) {
		j, _ := c.lookup(fid)
		for _, k := range j.Checkpoints {
			if k.OK && k.StoredOn != "" && k.StoredOn != "2" {
				return true, ""
			}
		}
		return false, fmt.Sprint(j.Checkpoints)
	})
	c.mustRun("cluster", "link", "2", "down")
	cut := time.Now()
	atCut := len(counts(t, free))
	// The old copy's last write: the file stops growing, before the
	// restart.
	var lastGrew time.Duration
	size := len(counts(t, fenced))
	waitFor(t, time.Minute, "the job restarted off node 2", func() (bool, string) {
		if n := len(counts(t, fenced)); n != size {
			size, lastGrew = n, time.Since(cut)
		}
		j, _ := c.lookup(fid)
		return j.State == api.StateRunning && j.Node != "2" && len(j.Restarts) == 1, j.State + " on " + j.Node
	})
	restarted := time.Since(cut)
	t.Logf("after the cut: the old copy's file last grew at %v; restarted at %v", lastGrew.Round(time.Millisecond), restarted.Round(time.Millisecond))
	if restarted > 6*time.Second+2*time.Second+10*time.Second {
		t.Errorf("restarted %v after the cut: past kill + margin + two sweeps", restarted)
	}
	if grew := len(counts(t, free)) - atCut; grew < 20 {
		t.Errorf("the job without a checkpoint wrote %d lines during the cut", grew)
	}
	c.mustRun("cluster", "link", "2", "up")
	waitFor(t, time.Minute, "the restored copy writing", func() (bool, string) {
		return len(counts(t, fenced)) > size+10, ""
	})
	c.mustRun("--node", "1", "kill", fid)
	// One fall, to the checkpoint's number, and a rise by one on each side.
	ns, falls := counts(t, fenced), 0
	for i := 1; i < len(ns); i++ {
		switch {
		case ns[i] == ns[i-1]+1:
		case ns[i] <= ns[i-1] && falls == 0:
			falls++
			t.Logf("the old copy's last line %d, the restored copy's first %d", ns[i-1], ns[i])
		default:
			t.Fatalf("line %d: %d after %d: the copies interleave (falls so far %d)", i+1, ns[i], ns[i-1], falls)
		}
	}
	if falls != 1 {
		t.Fatalf("%d falls in %d lines: want the one restart", falls, len(ns))
	}
	j := c.waitFinished(pid, 2*time.Minute)
	if j.ExitCode == nil || *j.ExitCode != 0 || j.Node != "2" || len(counts(t, free)) != 300 {
		t.Fatalf("the job without a checkpoint: %+v, %d lines", j, len(counts(t, free)))
	}
}
