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

// line is one line a writer of TestFenceCutNode appended: its number
// and when it wrote it (the host's clock, the same on every emulated
// node).
type line struct {
	n  int
	at time.Time
}

// lines reads a file of lines "N SECONDS.NANOS", one a write; a line cut
// by a kill is left out.
func lines(t *testing.T, path string) []line {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []line
	for _, l := range strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") {
		f := strings.Fields(l)
		if len(f) != 2 {
			continue
		}
		n, err1 := strconv.Atoi(f[0])
		sec, err2 := strconv.ParseFloat(f[1], 64)
		if err1 == nil && err2 == nil {
			out = append(out, line{n, time.Unix(0, int64(sec*1e9))})
		}
	}
	return out
}

// Fencing on real agents (3 nodes, fence 3s,6s,2s): a job of the job
// user's with a kept checkpoint on node 2 appends numbered, timed lines
// to a file all nodes share; node 2's link is cut while the file stays
// writable from it. Node 2 stops its copy at the lease, and node 1
// restarts the job elsewhere from its checkpoint within kill + margin +
// two sweeps; the file shows it: the numbers rise by one, fall back once
// to the checkpoint's (the restored copy's first line, written after the
// old copy's last), and rise by one to the end: the two copies never
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
	loop := `n=0; while [ $n -lt %d ]; do n=$((n+1)); echo $n $(date +%%s.%%N) >> %s; sleep 0.1; done`
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
	atCut := len(lines(t, free))
	var restartAt time.Time
	waitFor(t, time.Minute, "the job restarted off node 2", func() (bool, string) {
		j, _ := c.lookup(fid)
		if j.State == api.StateRunning && j.Node != "2" && len(j.Restarts) == 1 {
			restartAt = j.Restarts[0].At
			return true, ""
		}
		return false, j.State + " on " + j.Node
	})
	restarted := time.Since(cut)
	if restarted > 6*time.Second+2*time.Second+10*time.Second {
		t.Errorf("restarted %v after the cut: past kill + margin + two sweeps", restarted)
	}
	if grew := len(lines(t, free)) - atCut; grew < 20 {
		t.Errorf("the job without a checkpoint wrote %d lines during the cut", grew)
	}
	size := len(lines(t, fenced))
	c.mustRun("cluster", "link", "2", "up")
	waitFor(t, time.Minute, "the restored copy writing", func() (bool, string) {
		return len(lines(t, fenced)) > size+10, ""
	})
	c.mustRun("--node", "1", "kill", fid)
	// One fall, to the checkpoint's number, and a rise by one on each side.
	ls, fall := lines(t, fenced), 0
	for i := 1; i < len(ls); i++ {
		switch {
		case ls[i].n == ls[i-1].n+1:
		case ls[i].n <= ls[i-1].n && fall == 0:
			fall = i
		default:
			t.Fatalf("line %d: %d after %d: the copies interleave", i+1, ls[i].n, ls[i-1].n)
		}
	}
	if fall == 0 {
		t.Fatalf("no fall in %d lines: want the one restart", len(ls))
	}
	last, first := ls[fall-1], ls[fall]
	// The restored copy's first line may carry a time from before the
	// checkpoint (its `date` ran there): the restart's own time is the
	// home's record of it.
	t.Logf("after the cut: the old copy's last line (%d) at %v, the restored copy's first (%d), restarted at %v, seen by %v",
		last.n, last.at.Sub(cut).Round(time.Millisecond), first.n, restartAt.Sub(cut).Round(time.Millisecond), restarted.Round(time.Millisecond))
	if !last.at.Before(restartAt) || last.at.Sub(cut) > 3*time.Second+2*time.Second {
		t.Fatalf("the old copy wrote until %v after the cut, the restart was at %v: want the old one stopped at the lease (3s), well before the kill (6s)",
			last.at.Sub(cut), restartAt.Sub(cut))
	}
	j := c.waitFinished(pid, 2*time.Minute)
	if j.ExitCode == nil || *j.ExitCode != 0 || j.Node != "2" || len(lines(t, free)) != 300 {
		t.Fatalf("the job without a checkpoint: %+v, %d lines", j, len(lines(t, free)))
	}
}
