package agent

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"roam/internal/job"
	"roam/internal/sched"
)

// The node's load leaves out its jobs' roam-init processes, which only
// wait: two jobs whose inits (101, 201) are runnable besides their
// programs (102, 202), as just after a restore on a throttled node, make
// a load of two, not four; a runnable process that is no job's init
// (301), or whose pid a job's record names with another start time (401,
// a reused pid), counts. Before, a node with three jobs and one such init
// refused a fourth as if it ran four. The destination's admission judges
// a move with the same count.
func TestNodeLoadLeavesOutTheJobsInits(t *testing.T) {
	a := newStoreAgent(t)
	p := a.node // its runnable threads, counted as probe.Node counts them
	p.mu.Lock()
	p.threads = map[int]uint64{101: 7, 102: 8, 201: 9, 202: 10, 301: 11, 401: 12}
	p.mu.Unlock()
	a.jobs.Seed(nil, []job.Local{{ID: "n1.1", PID: 101, StartTix: 7}, {ID: "n1.2", PID: 201, StartTix: 9}, {ID: "n1.3", PID: 401, StartTix: 5}})
	var want []int
	refs, _ := a.jobs.Refs()
	for _, j := range refs {
		want = append(want, j.Rec.PID)
	}

	if got := a.sched.Runnable(); got != 4 {
		t.Fatalf("runnable threads %d, want 4 (the two programs, the other process, the reused pid); left out %v", got, p.skip)
	}
	var inits []int
	for pid := range p.skip {
		inits = append(inits, pid)
	}
	slices.Sort(inits)
	slices.Sort(want)
	if !slices.Equal(inits, want) || p.skip[101] != 7 || p.skip[201] != 9 {
		t.Fatalf("left out %v, want the local jobs' inits %v with their start times", p.skip, want)
	}

	// A move this node must decline, so that its answer names the count.
	mv := sched.Move{Job: "n1.7", To: a.cfg.NodeID, From: "n1", Kind: sched.ProblemCPU, RSSMB: 40, Runnable: 1, SrcLoad: 0.1, Threshold: 0.25}
	res, err := a.sched.Admit(mv)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Refused, "(4 runnable threads here") {
		t.Fatalf("admission answered %+v, want a refusal that counted 4 runnable threads", res)
	}
}

// The load a node sends counts the moves it admitted and has not yet
// received, each at least one thread, as its answers to moves do; a move
// that arrived, or whose admission lapsed, no longer counts. Before, a
// peer that a refusal had told of an admitted move forgot it at the
// node's next entry, measured before the job arrived, chose the node
// again and was refused again (in the lvm model, 6 nodes idled 0.39
// node-seconds instead of 0.09).
func TestSentLoadCountsAdmittedMoves(t *testing.T) {
	a := newStoreAgent(t)
	now := time.Now()
	if got := a.sched.Pending(now).Load; got != 0 {
		t.Fatalf("pending load %v with nothing admitted", got)
	}
	self := sched.Node{ID: a.cfg.NodeID, Capacity: a.capacity}
	for _, id := range []string{"n2.1", "n2.2"} {
		mv := sched.Move{Job: id, From: "n2", To: a.cfg.NodeID, Kind: sched.ProblemCPU, Runnable: 2, SrcLoad: 10, Threshold: 0.25}
		if ans, _ := a.rounds.Admit(mv, self, now); ans.Refused != nil {
			t.Fatal(ans.Refused)
		}
	}
	if got, want := a.sched.Pending(now).Load, 4/a.capacity; got != want {
		t.Fatalf("pending load %v after two admitted moves of 2 threads, want %v", got, want)
	}
	a.rounds.Arrived("n2.1")
	if got, want := a.sched.Pending(now).Load, 2/a.capacity; got != want {
		t.Fatalf("pending load %v after one arrived, want %v", got, want)
	}
	if got := a.sched.Pending(now.Add(sched.AdmitHold + time.Second)).Load; got != 0 {
		t.Fatalf("pending load %v after the admission lapsed", got)
	}
}

// newStoreAgent is a fresh fzAgent with a job table of its own, both gone
// when t ends.
func newStoreAgent(t *testing.T) *fzAgent {
	t.Helper()
	st, err := job.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return newFzAgent(t, st)
}
