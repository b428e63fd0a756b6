package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"roam/internal/api"
	"roam/internal/cgroup"
)

// sweepJobs are the jobs of sweep id, as root sees them on node 1.
func (c *cluster) sweepJobs(id string) []api.Job {
	var out []api.Job
	for _, j := range c.ps("1") {
		if j.Sweep == id {
			out = append(out, j)
		}
	}
	return out
}

var sweepLine = regexp.MustCompile(`roam: sweep (\S+): (.*)`)

// sweepOf is the sweep id roam run printed on standard error.
func sweepOf(t *testing.T, stderr string) string {
	t.Helper()
	m := sweepLine.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no sweep id in %q", stderr)
	}
	return m[1]
}

// A sweep as a user runs one, on real agents, one cluster for every
// check: --args-from's lines, substituted for {} inside one argument
// each, spaces and all; --max-running 2, never passed (sampled); each
// index's stdout and stderr in the files its patterns name, the user's,
// and a symlink planted at one path not followed; the summary and the
// exit status of the attached run; a rerun of the failed indices alone;
// roam kill SWEEP ending another sweep, its pending jobs too, at once;
// each index's own --mem from its line (--mem {1}M), held by its cgroup;
// and an ended job's CPU seconds in roam ps against its cgroup's count.
func TestSweep(t *testing.T) {
	c := upCluster(t, "e2eswp1", 73, "--nodes", "3")
	c.waitAllAlive(3)
	dir := userDir(t)
	burn := workload(t, "burn")

	// Another sweep, to be killed: 2 run, 4 wait.
	out, err := c.roamAs(jobUser, "--node", "1", "run", "-d", "-n", "6", "--max-running", "2", "--", "sleep", "600").CombinedOutput()
	if err != nil {
		t.Fatalf("run -d: %v: %s", err, out)
	}
	killed := sweepOf(t, string(out))

	// A job that burns 1.5 CPU seconds, then sleeps while the test reads
	// its cgroup's count.
	mark := filepath.Join(dir, "burnt")
	burner := c.startAs(jobUser, "2", "--pin", "sh", "-c", fmt.Sprintf("%s 1.5 0 && touch %s && sleep 2", burn, mark))
	waitFor(t, 20*time.Second, "the burner burnt", func() (bool, string) { _, err := os.Stat(mark); return err == nil, "" })
	layout, err := cgroup.Detect()
	if err != nil {
		t.Fatal(err)
	}
	counted, _, ok := (&cgroup.Jobs{Layout: layout, Parent: fmt.Sprintf("roam/%s/n2", c.name)}).Usage(burner)
	if !ok || counted < 1.45 {
		t.Fatalf("the burner's cgroup counts %.3f CPU seconds (%v)", counted, ok)
	}

	victim := filepath.Join(sharedDir(t, "victim-"), "victim")
	if err := os.WriteFile(victim, []byte("root's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, "out.2")); err != nil || os.Lchown(filepath.Join(dir, "out.2"), int(jobUser.uid), int(jobUser.gid)) != nil {
		t.Fatal("symlink", err)
	}
	lines := filepath.Join(dir, "lines")
	if err := os.WriteFile(lines, []byte("a b\nbad\nc\nbad\n'd' $e\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	script := fmt.Sprintf(`echo "arg=$1 idx=$ROAM_INDEX"; echo "err $ROAM_INDEX" >&2; sleep 1; [ "$1" != bad ] || [ -e %s/fixed ] || exit 7`, dir)
	run := c.roamAs(jobUser, "--node", "1", "run", "--args-from", lines, "--max-running", "2", "--output", dir+"/out.%a",
		"--error", dir+"/%A.err.%a", "--", "sh", "-c", script, "sh", "{}")
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	if err := run.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- run.Wait() }()
	most, pendingSeen, samples := 0, false, 0
	var runErr error
sample:
	for {
		select {
		case runErr = <-done:
			break sample
		default:
		}
		running := 0
		for _, j := range c.ps("1") {
			if !strings.Contains(j.Cmd, "arg=$1") {
				continue
			}
			switch j.State {
			case api.StateRunning, api.StateStarting, api.StateStopped:
				running++
			case api.StatePending:
				pendingSeen = pendingSeen || strings.Contains(j.PendingWhy, "--max-running 2")
			}
		}
		most, samples = max(most, running), samples+1
	}
	if code := exitCodeOf(runErr); code != 7 {
		t.Fatalf("the attached sweep exited %d, want 7 (index 1's): %s %s", code, stdout.String(), stderr.String())
	}
	if most > 2 || most == 0 || !pendingSeen {
		t.Fatalf("--max-running 2: at most %d running in %d samples, pending seen: %v", most, samples, pendingSeen)
	}
	m := sweepLine.FindAllStringSubmatch(stderr.String(), -1)
	if want := "5 jobs: 3 ok, 2 failed (exit 7: 1,3), 0 lost (roam run --rerun"; len(m) != 1 || !strings.HasPrefix(m[0][2], want) {
		t.Fatalf("the summary: %q, want %q", stderr.String(), want)
	}
	sw := m[len(m)-1][1]
	for i, want := range []string{"arg=a b idx=0\n", "arg=bad idx=1\n", "", "arg=bad idx=3\n", "arg='d' $e idx=4\n"} {
		if i == 2 {
			continue
		}
		checkUserFile(t, filepath.Join(dir, fmt.Sprintf("out.%d", i)), want)
		checkUserFile(t, filepath.Join(dir, fmt.Sprintf("%s.err.%d", sw, i)), fmt.Sprintf("err %d\n", i))
	}
	if b, _ := os.ReadFile(victim); string(b) != "root's\n" {
		t.Fatalf("written through the symlink: %q", b)
	}
	for _, j := range c.sweepJobs(sw) {
		if *j.Index == 2 && !strings.Contains(j.FileError, "symlink") {
			t.Fatalf("index 2's file error: %q", j.FileError)
		}
	}
	if logs := c.mustRunAs(jobUser, "--node", "2", "logs", sw+":2"); logs != "arg=c idx=2\nerr 2\n" {
		t.Fatalf("roam logs %s:2: %q", sw, logs)
	}

	// The rerun: the failed indices alone, as a new sweep naming the old.
	if err := os.WriteFile(filepath.Join(dir, "fixed"), nil, 0o644); err != nil || os.Remove(filepath.Join(dir, "out.1")) != nil {
		t.Fatal(err)
	}
	out, err = c.roamAs(jobUser, "--node", "1", "run", "--rerun", sw).CombinedOutput()
	m = sweepLine.FindAllStringSubmatch(string(out), -1)
	if err != nil || len(m) != 1 || m[0][2] != "2 jobs: 2 ok, 0 failed, 0 lost" {
		t.Fatalf("rerun: %v: %s", err, out)
	}
	again := c.sweepJobs(m[0][1])
	if m[0][1] == sw || len(again) != 2 || *again[0].Index != 1 || *again[1].Index != 3 {
		t.Fatalf("the rerun ran %+v", again)
	}
	checkUserFile(t, filepath.Join(dir, "out.1"), "arg=bad idx=1\n")
	// Later: roam ps SWEEP says the same, and roam attach of some of its
	// indices follows them again and exits with their status.
	if ps := c.mustRunAs(jobUser, "--node", "3", "ps", sw); !strings.HasPrefix(ps, "sweep "+sw+" of "+jobUser.name+", -n 5, --max-running 2: 5 jobs: 3 ok, 2 failed (exit 7: 1,3)") {
		t.Fatalf("roam ps %s:\n%s", sw, ps)
	}
	out, err = c.roamAs(jobUser, "--node", "2", "attach", sw+":2-3").CombinedOutput()
	if exitCodeOf(err) != 7 || !strings.Contains(string(out), "arg=c idx=2") || !strings.Contains(string(out), "2 jobs: 1 ok, 1 failed (exit 7: 3)") {
		t.Fatalf("roam attach %s:2-3: %v: %s", sw, err, out)
	}

	// roam kill SWEEP ends the rest at once: its 2 running jobs, and
	// the 4 pending before they start.
	waitFor(t, 10*time.Second, "2 of "+killed+" run", func() (bool, string) {
		n := 0
		for _, j := range c.sweepJobs(killed) {
			if j.State == api.StateRunning {
				n++
			}
		}
		return n == 2, fmt.Sprint(n)
	})
	start := time.Now()
	c.mustRunAs(jobUser, "--node", "3", "kill", killed)
	waitFor(t, 10*time.Second, killed+" ends", func() (bool, string) {
		for _, j := range c.sweepJobs(killed) {
			if j.State != api.StateFinished {
				return false, j.ID + " " + j.State
			}
		}
		return true, ""
	})
	took := time.Since(start)
	before := 0
	for _, j := range c.sweepJobs(killed) {
		if *j.ExitCode != 128+int(syscall.SIGTERM) {
			t.Fatalf("%s ended %d", j.ID, *j.ExitCode)
		}
		if strings.Contains(j.EndReason, "before it started") {
			before++
		}
	}
	if before != 4 || took > 3*time.Second {
		t.Fatalf("roam kill %s: %d ended before they started, all ended in %v", killed, before, took)
	}

	// --mem {1}M: each index asks the memory its line's first word says,
	// and its cgroup holds it to that on the node it runs on; {2}, its
	// second word, is in its command.
	sized := filepath.Join(dir, "sized")
	if err := os.WriteFile(sized, []byte("40 a\n72 b c\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = c.roamAs(jobUser, "--node", "1", "run", "-d", "--args-from", sized, "--mem", "{1}M", "--", "sh", "-c", `echo "$0"; sleep 600`, "{2}").CombinedOutput()
	if err != nil {
		t.Fatalf("run --mem {1}M: %v: %s", err, out)
	}
	each := sweepOf(t, string(out))
	for i, want := range []string{"a\n", "b\n"} {
		id := fmt.Sprintf("%s:%d", each, i)
		waitFor(t, 20*time.Second, id+" prints its {2}", func() (bool, string) {
			logs, _ := c.roamAs(jobUser, "--node", "1", "logs", id).CombinedOutput()
			return string(logs) == want, string(logs)
		})
	}
	for _, j := range c.sweepJobs(each) {
		want := []int64{40 << 20, 72 << 20}[*j.Index]
		rel := (&cgroup.Jobs{Layout: layout, Parent: fmt.Sprintf("roam/%s/n%s", c.name, j.Node)}).Rel(j.ID)
		if got := readTrim(filepath.Join(layout.Memory, rel, limitFile(layout, "memory"))); j.MemBytes != want || got != fmt.Sprint(want) {
			t.Fatalf("index %d of --mem {1}M: roam ps says %d bytes, its cgroup on node %s %q; its line asks %d", *j.Index, j.MemBytes, j.Node, got, want)
		}
	}
	c.mustRunAs(jobUser, "--node", "1", "kill", each)

	// The burner's CPU seconds in roam ps, once it ended, against its
	// cgroup's count read while it slept.
	var shown api.Job
	waitFor(t, 20*time.Second, burner+" ends", func() (bool, string) {
		for _, j := range c.ps("1") {
			if j.ID == burner {
				shown = j
			}
		}
		return shown.State == api.StateFinished, shown.State
	})
	if d := shown.CPUSeconds - counted; d > 0.05*counted || d < -0.05*counted || shown.ElapsedSeconds < 3 || len(shown.Nodes) != 1 {
		t.Fatalf("roam ps: %.3f CPU seconds (elapsed %.1f s on %v); its cgroup counted %.3f", shown.CPUSeconds, shown.ElapsedSeconds, shown.Nodes, counted)
	}
	t.Logf("CPU seconds: roam ps %.3f, cgroup %.3f; peak %.1f MiB; kill of a sweep of 6: %v; max-running 2: %d at most in %d samples",
		shown.CPUSeconds, counted, shown.PeakMB, took, most, samples)
}

// checkUserFile checks that path is the job user's, mode 0600, holding
// want.
func checkUserFile(t *testing.T, path, want string) {
	t.Helper()
	var st syscall.Stat_t
	b, err := os.ReadFile(path)
	if err != nil || syscall.Lstat(path, &st) != nil || st.Uid != jobUser.uid || st.Mode&0o777 != 0o600 || string(b) != want {
		t.Fatalf("%s: %v, uid %d mode %#o, holds %q; want the user's, 0600, %q", path, err, st.Uid, st.Mode&0o777, b, want)
	}
}
