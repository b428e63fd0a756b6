package bench

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"roam/internal/api"
)

func TestMeanStdAndSpeedup(t *testing.T) {
	r := &Result{Experiment: "speedup", XLabel: "nodes"}
	for _, v := range []float64{10, 12} {
		r.Add("roam", 1, "run time", "s", v)
	}
	for _, v := range []float64{5, 7} {
		r.Add("roam", 2, "run time", "s", v)
	}
	m := r.Get("roam", 1, "run time")
	if m.Mean != 11 || math.Abs(m.Std-math.Sqrt2) > 1e-12 {
		t.Fatalf("mean, std = %g, %g; want 11, 1.414", m.Mean, m.Std)
	}
	speedupMeasures(r, "roam", []int{1, 2})
	if s := r.Get("roam", 1, "speedup"); s.Mean != 1 || s.Std != 0 {
		t.Errorf("speedup on 1 node = %g ± %g, want exactly 1", s.Mean, s.Std)
	}
	s, e := r.Get("roam", 2, "speedup"), r.Get("roam", 2, "efficiency")
	if math.Abs(s.Mean-11.0/6) > 1e-12 || math.Abs(e.Mean-11.0/6*50) > 1e-9 {
		t.Errorf("speedup, efficiency on 2 nodes = %g, %g; want %g, %g", s.Mean, e.Mean, 11.0/6, 11.0/6*50)
	}
	if r.Get("ideal", 2, "speedup").Mean != 2 {
		t.Error("no ideal speedup line")
	}
}

func TestBalancedAfter(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	moved := func(s float64, from, to string) []api.Migration {
		return []api.Migration{{At: at(s), From: from, To: to, TotalMS: 200, OK: true}}
	}
	caps := map[string]float64{"1": 0.2, "2": 0.2}
	// Four jobs on node 1; two move to node 2 at 1.0 (+0.2) and 2.0 (+0.2).
	js := []api.Job{
		{ID: "1.1", Node: "1", Started: t0, Ended: at(10)},
		{ID: "1.2", Node: "1", Started: t0, Ended: at(10)},
		{ID: "1.3", Node: "2", Started: t0, Ended: at(10), MigrationLog: moved(1, "1", "2")},
		{ID: "1.4", Node: "2", Started: t0, Ended: at(10), MigrationLog: moved(2, "1", "2")},
	}
	// After the first move: 3 and 1 against shares of 2 and 2: not within 1.
	if got := BalancedAfter(js, caps); math.Abs(got-2.2) > 1e-9 {
		t.Errorf("balanced after %g s, want 2.2", got)
	}
	// A failed migration does not count; then it never balances before
	// the first end.
	js[3].MigrationLog[0].OK = false
	js[3].Node = "1"
	if got := BalancedAfter(js, caps); !math.IsNaN(got) {
		t.Errorf("balanced after %g s, want never (NaN)", got)
	}
	// Placed balanced from the start: 0.
	js[3].Node, js[2].MigrationLog = "2", nil
	if got := BalancedAfter(js, caps); got != 0 {
		t.Errorf("balanced after %g s, want 0", got)
	}
}

func TestWriteResults(t *testing.T) {
	dir := t.TempDir()
	r := &Result{Experiment: "speedup", Title: "T", XLabel: "nodes", Reps: 2,
		Charts: []Chart{{File: "s.png", Title: "Speedup", Metric: "speedup", XLabel: "nodes", YLabel: "speedup"}}}
	r.Add("roam", 1, "run time", "s", 4)
	r.Add("roam", 1, "run time", "s", 4.2)
	r.Add("roam", 2, "run time", "s", 2.1)
	speedupMeasures(r, "roam", []int{1, 2})
	r.Check("a check", false, "it failed")
	if err := WriteResults([]*Result{r}, Options{Out: dir, Command: "roam bench speedup"}); err != nil {
		t.Fatal(err)
	}
	md, _ := os.ReadFile(filepath.Join(dir, "report.md"))
	for _, want := range []string{"`roam bench speedup`", "| roam | 1 | 4.10 ± 0.14 |", "![Speedup](s.png)", "FAILED: a check — it failed"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	csv, _ := os.ReadFile(filepath.Join(dir, "results.csv"))
	if !strings.Contains(string(csv), "speedup,roam,nodes,1,run time,s,2,4.1,") {
		t.Errorf("results.csv:\n%s", csv)
	}
	if png, err := os.ReadFile(filepath.Join(dir, "s.png")); err != nil || !strings.HasPrefix(string(png), "\x89PNG") {
		t.Errorf("chart: %v", err)
	}
}

// A pivot metric gets a table of its own, a row per series and a column
// per x, and stays out of the main table.
func TestPivotTable(t *testing.T) {
	r := &Result{XLabel: "RSS (MiB)", Pivot: []string{"step"}}
	r.Add("eager freeze", 16, "time", "ms", 200)
	r.Add("eager · source · criu dump (frozen)", 16, "step", "ms", 50)
	r.Add("eager · source · criu dump (frozen)", 16, "step", "ms", 70)
	r.Add("eager · source · criu dump (frozen)", 128, "step", "ms", 300)
	r.Add("eager · destination · resume (frozen)", 128, "step", "ms", 1)
	got := Table(r)
	for _, want := range []string{
		"| series | RSS (MiB) | time (ms) |\n",
		"| step (ms) | RSS (MiB) 16 | RSS (MiB) 128 |\n",
		"| eager · source · criu dump (frozen) | 60.0 ± 14.1 | 300 |\n",
		"| eager · destination · resume (frozen) |  | 1.00 |\n",
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("no %q in\n%s", want, got)
		}
	}
	if strings.Contains(got, "step (ms) |\n") || strings.Count(got, "criu dump") != 1 {
		t.Fatalf("the step metric leaked into the main table:\n%s", got)
	}
}

func TestMoveTimes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	js := []api.Job{
		{ID: "1.1", Started: at(0.1), Ended: at(5)},
		{ID: "1.2", Started: t0, Ended: at(8), MigrationLog: []api.Migration{{At: at(0.6), OK: true}, {At: at(5.5), OK: true}}},
		{ID: "1.3", Started: t0, Ended: at(9), MigrationLog: []api.Migration{{At: at(0.4), OK: false}, {At: at(6), OK: true}}},
	}
	// The failed move at 0.4 is not the first; two moves follow the
	// first end (5 s).
	if first, again := moveTimes(js); math.Abs(first-0.6) > 1e-9 || again != 2 {
		t.Errorf("first move %g s, %d moves after the first end; want 0.6 and 2", first, again)
	}
	js[1].MigrationLog, js[2].MigrationLog = nil, nil
	if first, again := moveTimes(js); !math.IsNaN(first) || again != 0 {
		t.Errorf("no moves: first %g, again %d; want NaN and 0", first, again)
	}
}
