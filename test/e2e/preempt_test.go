package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"roam/internal/api"
)

// The queue's second level on real agents and CRIU, under the default
// policy: a user's sweep of two long jobs (1.5 CPU-s) and two short ones
// (0.2) on two nodes with room for one job each. The long ones start,
// have their quantum (0.5 CPU-s) while the short ones wait, and are
// preempted (roam ps: pending, preempted); the short ones run and end
// first; the long ones are restored from their checkpoints and end.
// Every job ends 0, each long one's output whole and in order in its
// file, and its CPU seconds in roam ps are what it burnt, the time before
// its preemption included.
func TestPreemptAndRestore(t *testing.T) {
	c := upCluster(t, "e2efb", 84, "--nodes", "2", "--cpu", "0.5", "--mem-mb", "256", "--scheduler", "feedback")
	c.waitAllAlive(2)
	dir := userDir(t)
	sweepjob := workload(t, "sweepjob")
	lines := filepath.Join(dir, "lines")
	if err := os.WriteFile(lines, []byte("1.5\n1.5\n0.2\n0.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`echo "start $ROAM_INDEX"; %s "$1" 64; echo "end $ROAM_INDEX"`, sweepjob)
	run := c.roamAs(jobUser, "--node", "1", "run", "--args-from", lines, "--mem", "160M", "--output", dir+"/out.%a",
		"--", "sh", "-c", script, "sh", "{}")
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	var runErr error
	preemptedSeen := false
sample:
	for {
		select {
		case runErr = <-done:
			break sample
		case <-time.After(100 * time.Millisecond): // roam ps asks every node, of half a CPU
		}
		for _, j := range c.ps("1") {
			preemptedSeen = preemptedSeen || j.State == api.StatePending && strings.HasPrefix(j.PendingWhy, "preempted") && j.CPUSeconds >= 0.45
		}
	}
	if code := exitCodeOf(runErr); code != 0 || !strings.Contains(stderr.String(), "4 jobs: 4 ok, 0 failed, 0 lost") {
		t.Fatalf("the attached sweep exited %d: %s %s", code, stdout.String(), stderr.String())
	}
	if !preemptedSeen {
		t.Error("roam ps never showed a job pending, preempted, with the CPU it had")
	}
	done1 := regexp.MustCompile(`^start (\d)\nsweepjob: done cpu=([0-9.]+) [^\n]*\nend (\d)\n$`)
	ended := map[int]api.Job{}
	for _, j := range c.ps("1") {
		if j.Index != nil && strings.Contains(j.Cmd, "sweepjob") {
			ended[*j.Index] = j
		}
	}
	for i, want := range []float64{1.5, 1.5, 0.2, 0.2} {
		j := ended[i]
		b, _ := os.ReadFile(filepath.Join(dir, fmt.Sprintf("out.%d", i)))
		m := done1.FindStringSubmatch(string(b))
		if m == nil || m[1] != strconv.Itoa(i) || m[3] != strconv.Itoa(i) {
			t.Fatalf("index %d's output: %q", i, b)
		}
		burnt, _ := strconv.ParseFloat(m[2], 64)
		if j.CPUSeconds < 0.9*burnt || j.CPUSeconds > 1.1*burnt+0.05 {
			t.Errorf("index %d: roam ps says %.3f CPU-s; it burnt %.2f", i, j.CPUSeconds, burnt)
		}
		long := want > 1
		restored := len(j.Restarts) == 1 && strings.Contains(j.Restarts[0].Why, "its turn again")
		if restored != long || j.State != api.StateFinished || j.ExitCode == nil || *j.ExitCode != 0 {
			t.Fatalf("index %d: %s exit %v, restarts %+v; want it restored once: %v", i, j.State, j.ExitCode, j.Restarts, long)
		}
		if long && (j.Ended.Before(ended[2].Ended) || j.Ended.Before(ended[3].Ended)) {
			t.Errorf("long index %d ended at %v, before a short one (%v, %v)", i, j.Ended, ended[2].Ended, ended[3].Ended)
		}
		t.Logf("index %d: %.2f CPU-s, ended %v, restarts %d", i, j.CPUSeconds, j.Ended.Format("15:04:05.000"), len(j.Restarts))
	}
}
