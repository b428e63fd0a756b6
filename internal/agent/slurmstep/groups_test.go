package slurmstep

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"roam/internal/cgroup"
	"roam/internal/slurm"
)

// TestExternStepWaitedFor: a job's start on a node whose extern step
// Slurm has not made yet waits for it, up to the bound, rather than fail
// at once; a step that never comes fails once the bound has passed.
func TestExternStepWaitedFor(t *testing.T) {
	root := t.TempDir()
	layout := cgroup.Layout{V2: true, CPU: root}
	c := slurm.Config{Cgroup: "slurm_n1"}
	step := filepath.Join(root, slurm.ExternDir("slurm_n1", 70821, "7"))
	go func() {
		time.Sleep(300 * time.Millisecond)
		_ = os.MkdirAll(step, 0o755)
	}()
	rels, err := externGroups(layout, c, 70821, "7", 5*time.Second)
	if err != nil {
		t.Fatalf("the step made 300 ms late was not waited for: %v", err)
	}
	if want := slurm.ExternDir("slurm_n1", 70821, "7"); rels[""] != want {
		t.Fatalf("groups %v, want %q", rels, want)
	}
	began := time.Now()
	if _, err := externGroups(layout, c, 70821, "8", 300*time.Millisecond); err == nil {
		t.Fatal("a step that never came was taken")
	}
	if d := time.Since(began); d < 300*time.Millisecond {
		t.Fatalf("gave up after %v, before the bound", d)
	}
}
