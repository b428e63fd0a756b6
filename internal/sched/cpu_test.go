package sched

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"roam/internal/cpufeat"
	"roam/internal/cpufeat/cpufeattest"
)

// cpuSnap is node self, crowded with n jobs that started on a CPU
// offering image, and idle peers.
func cpuSnap(self Node, n int, image cpufeat.Set, peers ...Node) Snapshot {
	s := Snapshot{Now: t0, Self: self, Peers: peers}
	s.Self.Load = float64(n) / self.Capacity
	for i := range n {
		s.Jobs = append(s.Jobs, Job{ID: fmt.Sprintf("j%d", i+1), Started: t0.Add(-time.Minute), RSSMB: 10, Runnable: 1, CPU: image})
	}
	return s
}

// A job that started on the AVX-512 node never moves to the Haswell, by
// any policy or a drain, however idle it is; the reverse moves; a job
// that started on the Haswell and runs on the newer node now may go back
// (its image has the Haswell's features only).
func TestJobsMoveOnlyToCPUsThatRunThem(t *testing.T) {
	older, newer := cpufeattest.TwoGenerations(t)
	bal := mustPolicy(t, "balance")
	rng := rand.New(rand.NewSource(1))
	oldIdle := Node{ID: "old", Capacity: 4, MemFreeMB: 4000, Received: t0, CPU: older}
	newIdle := Node{ID: "new2", Capacity: 1, MemFreeMB: 4000, Received: t0, CPU: newer}

	s := cpuSnap(Node{ID: "new", Capacity: 1, MemFreeMB: 4000, CPU: newer}, 6, newer, oldIdle)
	if moves := bal.Decide(s, rng); len(moves) != 0 {
		t.Fatalf("moves of jobs started on AVX-512 to the Haswell: %v", moves)
	}
	s.Self.Draining = true
	if moves := Drain(s); len(moves) != 0 {
		t.Fatalf("a drain moves jobs started on AVX-512 to the Haswell: %v", moves)
	}
	s.Self.Draining = false
	s.Peers = append(s.Peers, newIdle)
	moves := bal.Decide(s, rng)
	if len(moves) == 0 {
		t.Fatal("no move to the idle AVX-512 peer")
	}
	for _, mv := range moves {
		if mv.To != "new2" || mv.CPU != newer {
			t.Fatalf("move %+v; want to new2, carrying the job's CPU", mv)
		}
	}
	// The destination judges again: the Haswell refuses such a move, and
	// says what it lacks, on one line.
	mv := moves[0]
	err := Admit(mv, Node{ID: "old", Capacity: 4, MemFreeMB: 4000, CPU: older})
	if err == nil || !strings.Contains(err.Error(), "avx512f") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("the Haswell admits a job started on AVX-512: %v", err)
	}

	// Jobs started on the Haswell move to the newer node.
	s = cpuSnap(Node{ID: "old", Capacity: 1, MemFreeMB: 4000, CPU: older}, 6, older,
		Node{ID: "new", Capacity: 4, MemFreeMB: 4000, Received: t0, CPU: newer})
	moves = bal.Decide(s, rng)
	if len(moves) == 0 {
		t.Fatal("no move of jobs started on the Haswell to the idle AVX-512 node")
	}
	if err := Admit(moves[0], Node{ID: "new", Capacity: 4, MemFreeMB: 4000, CPU: newer}); err != nil {
		t.Fatalf("the AVX-512 node refuses a job started on the Haswell: %v", err)
	}
	// And such a job, on the newer node now, may go back.
	s = cpuSnap(Node{ID: "new", Capacity: 1, MemFreeMB: 4000, CPU: newer}, 6, older, oldIdle)
	if moves := bal.Decide(s, rng); len(moves) == 0 {
		t.Fatal("a job started on the Haswell does not go back to it")
	}
}

// Unknown features are judged as before they were compared: a node that
// does not say takes any job, and a job of an older record goes anywhere.
func TestUnknownCPUsFitAsBefore(t *testing.T) {
	older, newer := cpufeattest.TwoGenerations(t)
	bal := mustPolicy(t, "balance")
	rng := rand.New(rand.NewSource(1))
	s := cpuSnap(Node{ID: "new", Capacity: 1, MemFreeMB: 4000, CPU: newer}, 6, newer,
		Node{ID: "quiet", Capacity: 4, MemFreeMB: 4000, Received: t0})
	if moves := bal.Decide(s, rng); len(moves) == 0 {
		t.Fatal("no move to a node that does not say its CPU")
	}
	s = cpuSnap(Node{ID: "new", Capacity: 1, MemFreeMB: 4000, CPU: newer}, 6, cpufeat.Set{},
		Node{ID: "old", Capacity: 4, MemFreeMB: 4000, Received: t0, CPU: older})
	if moves := bal.Decide(s, rng); len(moves) == 0 {
		t.Fatal("no move of a job of unknown CPU")
	}
}

// Over random clusters of the two generations and random jobs, no
// policy's or drain's move ever sends a job to a CPU that lacks a feature
// of the one it started on, and restarts' candidates (RunsImage) are
// exactly the nodes that fit.
func TestNoMoveToAnUnfitCPU(t *testing.T) {
	older, newer := cpufeattest.TwoGenerations(t)
	sets := []cpufeat.Set{older, newer, {}}
	rng := rand.New(rand.NewSource(45))
	pols := []*Scheduler{mustPolicy(t, "balance"), mustPolicy(t, "static")}
	moved := 0
	for round := range 300 {
		self := Node{ID: "n1", Capacity: 1, MemFreeMB: 4000, CPU: sets[rng.Intn(3)], Draining: round%5 == 0}
		var peers []Node
		for i := range 1 + rng.Intn(4) {
			peers = append(peers, Node{ID: fmt.Sprintf("n%d", i+2), Capacity: 1 + float64(rng.Intn(4)), MemFreeMB: 4000, Received: t0, CPU: sets[rng.Intn(3)]})
		}
		s := cpuSnap(self, 2+rng.Intn(8), cpufeat.Set{}, peers...)
		for i := range s.Jobs {
			s.Jobs[i].CPU = sets[rng.Intn(3)]
		}
		at := map[string]Node{}
		for _, p := range peers {
			at[p.ID] = p
		}
		image := map[string]cpufeat.Set{}
		for _, j := range s.Jobs {
			image[j.ID] = j.CPU
		}
		for _, mv := range pols[round%2].Decide(s, rng) {
			moved++
			if !cpufeat.Fits(image[mv.Job], at[mv.To].CPU) {
				t.Fatalf("round %d: job %s (%s) moved to %s (%s)", round, mv.Job, image[mv.Job].Summary(), mv.To, at[mv.To].CPU.Summary())
			}
		}
		var loads []NodeLoad
		for _, p := range peers {
			loads = append(loads, NodeLoad{ID: p.ID, Capacity: p.Capacity, CPU: p.CPU})
		}
		img := sets[rng.Intn(3)]
		fit, err := RunsImage(loads, img)
		want := 0
		for _, l := range loads {
			if cpufeat.Fits(img, l.CPU) {
				want++
			}
		}
		if len(fit) != want || (want == 0) != (err != nil) {
			t.Fatalf("round %d: RunsImage kept %d of %d, %d fit (err %v)", round, len(fit), len(loads), want, err)
		}
	}
	if moved < 100 {
		t.Fatalf("only %d moves in 300 rounds: the test tests too little", moved)
	}
}
