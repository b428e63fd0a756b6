package agent

import (
	"path/filepath"
	"slices"
	"testing"

	"roam/internal/job"
)

// threadsProber stands for a node whose runnable threads are tids: it
// counts those not in skip, as probe.Node does, and keeps the last skip.
type threadsProber struct {
	tids []int
	skip map[int]bool
}

func (p *threadsProber) Runnable(skip map[int]bool) int {
	p.skip = skip
	n := 0
	for _, t := range p.tids {
		if !skip[t] {
			n++
		}
	}
	return n
}

func (p *threadsProber) MemFreeMB() float64 { return 4096 }

// The node's load leaves out its jobs' roam-init processes, which only
// wait: two jobs whose inits (101, 201) are runnable besides their
// programs (102, 202), as just after a restore on a throttled node, make
// a load of two, not four; a runnable process that is no job's init
// (301) counts. Before, a node with three jobs and one such init refused
// a fourth job as if it ran four.
func TestNodeLoadLeavesOutTheJobsInits(t *testing.T) {
	st, err := job.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a := newFzAgent(t, st)
	p := &threadsProber{tids: []int{101, 102, 201, 202, 301}}
	a.prober = p
	a.jobs.mu.Lock()
	a.jobs.local["n1.1"] = &localJob{rec: job.Local{ID: "n1.1", PID: 101}}
	a.jobs.local["n1.2"] = &localJob{rec: job.Local{ID: "n1.2", PID: 201}}
	a.jobs.mu.Unlock()

	if got := a.runnable(); got != 3 {
		t.Fatalf("runnable threads %d, want 3 (the two programs and the other process); left out %v", got, p.skip)
	}
	var want []int
	a.jobs.mu.Lock()
	for _, j := range a.jobs.local {
		want = append(want, j.rec.PID)
	}
	a.jobs.mu.Unlock()
	var inits []int
	for pid := range p.skip {
		inits = append(inits, pid)
	}
	slices.Sort(inits)
	slices.Sort(want)
	if !slices.Equal(inits, want) || !slices.Contains(inits, 101) || !slices.Contains(inits, 201) {
		t.Fatalf("left out %v, want the local jobs' inits %v", inits, want)
	}
}
