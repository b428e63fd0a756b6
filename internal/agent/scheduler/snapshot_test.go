package scheduler

import (
	"testing"

	"roam/internal/job"
	"roam/internal/load"
	"roam/internal/migrate"
	"roam/internal/sched"
)

// A job's CPU time is what it had before this node and what its count
// here grew by since it came: a job that comes back to a node before its
// old cgroup there is gone finds the old count in it (job.Local.CPUBase),
// which it carries in CPUBefore already. The bounds of CPU times on the
// wire agree, so what a node counts, it can send.
func TestAttainedCountsOnlyWhatTheCopyHereHad(t *testing.T) {
	l := job.Local{CPUBefore: 30, CPUBase: 12}
	if got := AttainedFrom(12.5, l); got != 30.5 {
		t.Fatalf("attained %v, want 30.5 (30 before, 0.5 here)", got)
	}
	if got := AttainedFrom(3, l); got != 30 {
		t.Fatalf("attained %v with a count under the base, want 30", got)
	}
	if got := AttainedFrom(1e11, job.Local{}); got != migrate.MaxCPUBefore {
		t.Fatalf("attained %v, want the bound %v", got, migrate.MaxCPUBefore)
	}
	if sched.MaxCPUSeconds != load.MaxLeast || load.MaxLeast != migrate.MaxCPUBefore {
		t.Fatalf("bounds of CPU times differ: sched %v, load %v, migrate %v", sched.MaxCPUSeconds, load.MaxLeast, migrate.MaxCPUBefore)
	}
}
