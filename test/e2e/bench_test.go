package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"roam/internal/bench"
	"roam/internal/emu"
)

// Every experiment of the benchmark framework, with --quick, through the
// real CLI: the files it writes, and the numbers' sanity.
func TestBenchQuickAll(t *testing.T) {
	long(t)
	for _, w := range []string{"dkg", "usercode", "syscode", "mgs", "migjob", "burn", "bgload", "startloop", "sweepjob"} {
		workload(t, w)
	}
	roam := filepath.Join(binDir, "roam")
	list, err := exec.Command(roam, "bench", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("roam bench list: %v\n%s", err, list)
	}
	for _, x := range bench.Experiments {
		if !bytes.Contains(list, []byte(x.Name+" — ")) {
			t.Errorf("roam bench list does not name %s:\n%s", x.Name, list)
		}
	}
	out := t.TempDir()
	cmd := exec.Command(roam, "bench", "all", "--quick", "--out", out)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	t.Logf("roam bench all --quick:\n%s", stdout.String())
	for _, name := range []string{"bspeed", "blvm", "bdvs", "bmcost", "bsys", "btraf", "bmig", "bckpt", "e2eobsb", "bburst", "bjobs", "bsweep"} {
		if left := emu.Leftovers(name); len(left) > 0 {
			t.Errorf("cluster %s left %v", name, left)
		}
	}
	if err != nil {
		t.Fatalf("roam bench all --quick: %v\n%s", err, stderr.String())
	}
	// Progress: a line per measured run, with an estimate of the time left.
	if !strings.Contains(stderr.String(), "left)") {
		t.Errorf("no estimate of the time left in the progress:\n%s", stderr.String())
	}

	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rs []bench.Result
	if err := json.Unmarshal(b, &rs); err != nil {
		t.Fatalf("results.json: %v", err)
	}
	byName := map[string]*bench.Result{}
	total := 0.0
	for i := range rs {
		byName[rs[i].Experiment] = &rs[i]
		total += rs[i].Seconds
	}
	t.Logf("all experiments took %.0f s", total)
	if total > 600 {
		t.Errorf("the quick experiments took %.0f s together, over the 10 minutes they may take", total)
	}
	report, _ := os.ReadFile(filepath.Join(out, "report.md"))
	csv, _ := os.ReadFile(filepath.Join(out, "results.csv"))
	for _, x := range bench.Experiments {
		r := byName[x.Name]
		if r == nil {
			t.Errorf("results.json has no %s", x.Name)
			continue
		}
		if len(r.Measures) == 0 {
			t.Errorf("%s measured nothing", x.Name)
		}
		for _, c := range r.Checks {
			if !c.OK {
				t.Errorf("%s: check failed: %s — %s", x.Name, c.Name, c.Detail)
			}
		}
		for _, c := range r.Charts {
			png, err := os.ReadFile(filepath.Join(out, c.File))
			if err != nil || len(png) < 5000 || !bytes.HasPrefix(png, []byte("\x89PNG")) {
				t.Errorf("%s: chart %s is missing or not a drawn PNG (%d bytes, %v)", x.Name, c.File, len(png), err)
			}
			if !bytes.Contains(report, []byte("("+c.File+")")) {
				t.Errorf("report.md does not show %s", c.File)
			}
		}
		if !bytes.Contains(report, []byte("## "+x.Name+" — ")) {
			t.Errorf("report.md has no section for %s", x.Name)
		}
		if !bytes.Contains(csv, []byte("\n"+x.Name+",")) {
			t.Errorf("results.csv has no row of %s", x.Name)
		}
	}

	// The numbers' sanity, asserted here as well as in the checks.
	mean := func(exp, series string, x float64, metric string) float64 {
		t.Helper()
		r := byName[exp]
		if r == nil {
			t.Fatalf("no %s", exp)
		}
		m := r.Get(series, x, metric)
		if m == nil {
			t.Fatalf("%s has no %s of %s at %g", exp, metric, series, x)
		}
		return m.Mean
	}
	if s := mean("speedup", "roam", 1, "speedup"); s != 1 {
		t.Errorf("speedup on 1 node = %g, want 1", s)
	}
	for _, n := range []float64{2, 4} {
		s, e := mean("speedup", "roam", n, "speedup"), mean("speedup", "roam", n, "efficiency")
		if e > 115 || s <= 1 {
			t.Errorf("speedup on %g nodes %.2f, efficiency %.0f %%: want more than 1 and at most 100 %% + noise", n, s, e)
		}
	}
	for _, pol := range []string{"fifo", "beneficial"} {
		if e := mean("lvm", pol, 4, "efficiency"); e > 115 {
			t.Errorf("lvm %s: efficiency on 4 nodes %.0f %%", pol, e)
		}
	}
	for _, exp := range []string{"speedup", "lvm", "migration-cost", "syscall-cost"} {
		found := false
		for _, c := range byName[exp].Checks {
			if strings.Contains(c.Name, "same result") || strings.Contains(c.Name, "equal a local unmigrated run") {
				found = c.OK
			}
		}
		if !found {
			t.Errorf("%s: no passing check that migrated and unmigrated runs give the same result", exp)
		}
	}
	// Static under background load on 3 equal nodes with 6 processes
	// cannot beat the ideal; the ideal is a lower bound for both.
	for _, s := range []string{"balance, no background", "static, no background"} {
		if m, ideal := mean("dynamic-vs-static", s, 6, "makespan"), mean("dynamic-vs-static", "ideal, no background", 6, "makespan"); m < 0.95*ideal {
			t.Errorf("%s: makespan %.2f s below the ideal %.2f s", s, m, ideal)
		}
	}
	if f := mean("migrate", "eager freeze", 16, "time"); f <= 0 {
		t.Errorf("migrate: eager freeze of 16 MiB = %g ms", f)
	}
	// Both sides of job-start started their jobs, roam's counted at their
	// records' starts: a start taken when the job was placed, not when it
	// ran, would put all of them at the command's start.
	if roam, loop := mean("job-start", "roam", 4, "rate"), mean("job-start", "local loop", 4, "rate"); roam <= 0 || loop <= 0 || roam > 20*loop {
		t.Errorf("job-start: roam %.0f jobs/s, the local loop %.0f", roam, loop)
	}
}

// A benchmark stopped by SIGTERM (or ^C) takes its cluster down before it
// exits, with 128 + the signal: before, it left the cluster up (network
// namespaces, a bridge, cgroups and agents) until roam cluster down.
func TestBenchStoppedTakesItsClusterDown(t *testing.T) {
	for _, w := range []string{"dkg", "usercode", "syscode", "mgs", "migjob", "burn", "bgload", "startloop", "sweepjob"} {
		workload(t, w) // the framework wants every tool there
	}
	cmd := exec.Command(filepath.Join(binDir, "roam"), "bench", "lvm", "--quick", "--out", t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = emu.Down("blvm")
	})
	waitFor(t, 2*time.Minute, "the benchmark's first run", func() (bool, string) {
		return strings.Contains(stderr.String(), "] round 1, "), stderr.String()
	})
	if len(emu.Leftovers("blvm")) == 0 {
		t.Fatal("the benchmark's cluster is not up")
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	if code := exitCodeOf(err); code != 128+int(syscall.SIGTERM) {
		t.Fatalf("roam bench exited with %d (%v), want %d:\n%s", code, err, 128+int(syscall.SIGTERM), stderr.String())
	}
	if left := emu.Leftovers("blvm"); len(left) > 0 {
		t.Fatalf("the stopped benchmark left %v:\n%s", left, stderr.String())
	}
	if !strings.Contains(stderr.String(), "took down 1 cluster(s) [blvm]") {
		t.Fatalf("it did not say what it took down:\n%s", stderr.String())
	}
}
