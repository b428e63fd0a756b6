package sched

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"roam/internal/resources"
	"time"
)

var drainNow = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// drainSnap is node n1 with jobs j1..jN of one runnable thread and 100
// MiB each, and peers.
func drainSnap(n int, peers ...Node) Snapshot {
	s := Snapshot{Now: drainNow, Self: Node{ID: "n1", Capacity: 1, Load: float64(n), MemFreeMB: 1000, Draining: true}, Peers: peers}
	for i := 1; i <= n; i++ {
		s.Jobs = append(s.Jobs, Job{ID: fmt.Sprintf("j%d", i), Started: drainNow.Add(-time.Minute), RSSMB: 100, Runnable: 1})
	}
	return s
}

// A draining node moves every job it may, spread by load over the peers
// with room (a faster peer takes more), none to a draining peer; a job
// pinned with roam run --pin or found unmovable stays, one placed by hand
// moves, one no peer has room for stays.
func TestDrainMovesEveryMovableJob(t *testing.T) {
	s := drainSnap(9,
		Node{ID: "n2", Capacity: 2, MemFreeMB: 4000, Received: drainNow},
		Node{ID: "n3", Capacity: 1, MemFreeMB: 4000, Received: drainNow},
		Node{ID: "n4", Capacity: 4, MemFreeMB: 4000, Received: drainNow, Draining: true},
		Node{ID: "n5", Capacity: 1, MemFreeMB: 100, Received: drainNow}, // no room for 100 MiB and 64 to keep
	)
	s.Jobs[0].Held = "pinned (run --pin)"
	s.Jobs[1].Held = "holds a FLOCK lock on /x"
	s.Jobs[2].Held, s.Jobs[2].Manual = "placed by hand", true
	s.Jobs[3].RSSMB = 5000 // no peer has room
	moves := mustPolicy(t, "static").Decide(s, rand.New(rand.NewSource(1)))
	per := map[string]int{}
	moved := map[string]bool{}
	for _, mv := range moves {
		if mv.Kind != ProblemDrain || mv.From != "n1" || mv.By != "drain" || !strings.Contains(mv.Why, "node n1 is draining") {
			t.Errorf("move %+v", mv)
		}
		if err := Admit(mv, Node{ID: mv.To, Capacity: 1, Load: 10, MemFreeMB: 4000}); err != nil {
			t.Errorf("a busy destination with room refuses %s: %v", mv.Job, err)
		}
		per[mv.To]++
		moved[mv.Job] = true
	}
	for _, j := range []string{"j1", "j2", "j4"} {
		if moved[j] {
			t.Errorf("%s moved", j)
		}
	}
	if len(moves) != 6 || !moved["j3"] {
		t.Fatalf("moves %v; want the 6 movable jobs, j3 (placed by hand) among them", moves)
	}
	// Loads with them: n2 (2 cores) 4/2, n3 2/1: equal shares.
	if per["n2"] != 4 || per["n3"] != 2 || per["n4"] != 0 || per["n5"] != 0 {
		t.Fatalf("per node %v; want n2 4, n3 2", per)
	}
}

// Nodes that are not draining never choose a draining peer, and a
// draining destination refuses any move.
func TestDrainingPeerGetsNothing(t *testing.T) {
	s := Snapshot{Now: drainNow, Self: Node{ID: "n1", Capacity: 1, Load: 4, MemFreeMB: 4000},
		Peers: []Node{{ID: "n2", Capacity: 1, MemFreeMB: 4000, Received: drainNow, Draining: true}}}
	for i := 1; i <= 4; i++ {
		s.Jobs = append(s.Jobs, Job{ID: fmt.Sprintf("j%d", i), Started: drainNow.Add(-time.Minute), RSSMB: 10, Runnable: 1})
	}
	bal := mustPolicy(t, "balance")
	if moves := bal.Decide(s, rand.New(rand.NewSource(1))); len(moves) != 0 {
		t.Fatalf("moves to a draining peer: %v", moves)
	}
	s.Peers = append(s.Peers, Node{ID: "n3", Capacity: 1, MemFreeMB: 4000, Received: drainNow})
	moves := bal.Decide(s, rand.New(rand.NewSource(1)))
	if len(moves) == 0 {
		t.Fatal("no move to the idle peer that is not draining")
	}
	for _, mv := range moves {
		if mv.To != "n3" {
			t.Fatalf("move %+v; want to n3", mv)
		}
		if err := Admit(mv, Node{ID: "n3", Capacity: 1, MemFreeMB: 4000, Draining: true}); err == nil || !strings.Contains(err.Error(), "draining") {
			t.Fatalf("a draining destination admits: %v", err)
		}
	}
	// A drain's move needs room, not a gain.
	mv := Move{Job: "j1", To: "n3", Kind: ProblemDrain, RSSMB: 100, Runnable: 1, KeepFreeMB: DrainKeepFreeMB}
	if err := Admit(mv, Node{ID: "n3", Capacity: 1, Load: 3, MemFreeMB: 150}); err == nil || !strings.Contains(err.Error(), "under the 64 MiB to keep") {
		t.Fatalf("no room: %v", err)
	}
}

// No placement puts a job on a draining node; with only draining nodes
// there is none.
func TestPlaceSkipsDrainingNodes(t *testing.T) {
	nodes := []NodeLoad{{ID: "n1", Capacity: 1}, {ID: "n2", Capacity: 8, Draining: true}, {ID: "n3", Capacity: 1, Load: 3}}
	for _, kind := range []string{"least-loaded", "random-two", "round-robin"} {
		out, _, err := Place(kind, nodes, 12, resources.Request{}, rand.New(rand.NewSource(1)), 0)
		if err != nil || len(out) != 12 {
			t.Fatalf("%s: %v %v", kind, out, err)
		}
		for _, n := range out {
			if n == "n2" {
				t.Fatalf("%s placed on the draining node: %v", kind, out)
			}
		}
	}
	if out, _, err := Place("least-loaded", nodes[1:2], 1, resources.Request{}, rand.New(rand.NewSource(1)), 0); err == nil {
		t.Fatalf("placed %v with every node draining", out)
	}
}

// A job of a Slurm allocation (Job.Within) goes only to the allocation's
// nodes, though another has more room; a drain moves it there too, or
// leaves it where no node of its allocation has room.
func TestJobsOfAnAllocationStayWithinIt(t *testing.T) {
	s := Snapshot{Now: drainNow, Self: Node{ID: "n1", Capacity: 1, Load: 6, MemFreeMB: 4000},
		Peers: []Node{{ID: "n2", Capacity: 1, Load: 1, MemFreeMB: 4000, Received: drainNow}, {ID: "n4", Capacity: 4, MemFreeMB: 4000, Received: drainNow}}}
	for i := 1; i <= 6; i++ {
		s.Jobs = append(s.Jobs, Job{ID: fmt.Sprintf("j%d", i), Started: drainNow.Add(-time.Minute), RSSMB: 10, Runnable: 1, Within: []string{"n1", "n2"}})
	}
	s.Jobs[5].Within = []string{"n1"}
	for _, pol := range []string{"balance", "mosix", "ushering", "static"} {
		snap := s
		snap.Self.Draining = pol == "static"
		moves := mustPolicy(t, pol).Decide(snap, rand.New(rand.NewSource(1)))
		if len(moves) == 0 && pol != "ushering" {
			t.Errorf("%s: no move, though n2 has room", pol)
		}
		for _, mv := range moves {
			if mv.To != "n2" || mv.Job == "j6" {
				t.Errorf("%s: %s to %s, outside its allocation", pol, mv.Job, mv.To)
			}
		}
	}
}
