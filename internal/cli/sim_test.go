//go:build !node

package cli

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"roam/internal/sim"
)

// Two runs of roam sim with one seed write the same results files, byte
// for byte; the cost, which differs, is in a file of its own.
func TestSimResultsAreByteIdentical(t *testing.T) {
	spec := simSpec{cfg: sim.DefaultConfig(), vector: "beneficial", workload: "poisson", util: 0.7, mean: 20, shape: 1.5}
	spec.cfg.Nodes, spec.cfg.Duration, spec.cfg.Failures = 200, 30*time.Second, 2
	var dirs []string
	for range 2 {
		spec.out = t.TempDir()
		if _, err := runSim(spec); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, spec.out)
	}
	for _, name := range []string{"results.csv", "results.json", "report.md"} {
		a, errA := os.ReadFile(filepath.Join(dirs[0], name))
		b, errB := os.ReadFile(filepath.Join(dirs[1], name))
		if errA != nil || errB != nil || len(a) == 0 {
			t.Fatalf("%s: %v %v (%d bytes)", name, errA, errB, len(a))
		}
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two runs of one seed:\n%s\n%s", name, a, b)
		}
	}
	if c, err := os.ReadFile(filepath.Join(dirs[0], "cost.json")); err != nil || !bytes.Contains(c, []byte(`"events_per_second"`)) {
		t.Errorf("cost.json: %v %s", err, c)
	}
}

// An SWF trace drives a run; a bad flag is refused, naming it.
func TestSimFlags(t *testing.T) {
	spec := simSpec{cfg: sim.DefaultConfig(), vector: "fifo", workload: filepath.Join("..", "sim", "testdata", "small.swf"), out: t.TempDir()}
	spec.cfg.Nodes, spec.cfg.Duration = 16, 10*time.Minute
	if _, err := runSim(spec); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(filepath.Join(spec.out, "results.json"))
	if !bytes.Contains(b, []byte(`"processes_done": 7`)) {
		t.Errorf("the trace's processes did not all run:\n%s", b)
	}
	spec.workload, spec.util = "poisson", 2
	if _, err := runSim(spec); err == nil || !bytes.Contains([]byte(err.Error()), []byte("--util")) {
		t.Errorf("--util 2: %v", err)
	}
	spec.util, spec.mean, spec.vector = 0.5, 10, "lifo"
	if _, err := runSim(spec); err == nil || !bytes.Contains([]byte(err.Error()), []byte("vector policy")) {
		t.Errorf("--vector lifo: %v", err)
	}
}

// TestSimInterval: --interval sets how often the nodes gossip their
// loads, so the entries placement reads are older; a non-positive one is
// refused, naming it.
func TestSimInterval(t *testing.T) {
	age := func(iv string) float64 {
		out := t.TempDir()
		var o, e bytes.Buffer
		if code := run([]string{"sim", "--nodes", "16", "--time", "2m", "--interval", iv, "--out", out}, &o, &e); code != 0 {
			t.Fatalf("roam sim --interval %s: exit %d: %s", iv, code, e.String())
		}
		var r struct {
			Age float64 `json:"mean_gossip_age_s"`
		}
		b, _ := os.ReadFile(filepath.Join(out, "results.json"))
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatal(err)
		}
		return r.Age
	}
	if a1, a4 := age("1s"), age("4s"); !(a4 > 2*a1) {
		t.Errorf("mean gossip age %.2f s at --interval 1s, %.2f s at 4s", a1, a4)
	}
	var o, e bytes.Buffer
	if code := run([]string{"sim", "--interval", "0s", "--out", t.TempDir()}, &o, &e); code == 0 || !strings.Contains(e.String(), "interval") {
		t.Errorf("--interval 0s: exit %d, %q", code, e.String())
	}
}
