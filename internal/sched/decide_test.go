package sched

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"roam/internal/resources"
	"time"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func mustPolicy(t *testing.T, name string) *Scheduler {
	t.Helper()
	s, err := ParsePolicy([]byte(Builtin[name]))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return s
}

func TestBuiltinPoliciesParse(t *testing.T) {
	for name := range Builtin {
		s := mustPolicy(t, name)
		if s.Policy.Name != name {
			t.Fatalf("builtin %s calls itself %s", name, s.Policy.Name)
		}
		// What show prints parses back to the same policy.
		again, err := ParsePolicy([]byte(s.Text()))
		if err != nil || again.Text() != s.Text() {
			t.Fatalf("%s does not round-trip: %v\n%s\n%s", name, err, s.Text(), again.Text())
		}
	}
	if mustPolicy(t, "static").managers != nil {
		t.Fatal("static has a manager")
	}
}

func TestBadPoliciesNameTheField(t *testing.T) {
	cases := map[string]string{
		"name: x\nplacement: nearest\n":                                                 `placement "nearest"`,
		"name: x\nprobes: {c: {kind: gpu}}\n":                                           `probe c: kind "gpu"`,
		"name: x\nanalyzers: {a: {type: magic}}\n":                                      `analyzer a: type "magic"`,
		"name: x\nanalyzers: {a: {type: balance, inputs: [cpu]}}\n":                     `analyzer a: input "cpu"`,
		"name: x\nanalyzers: {a: {type: balance, params: {threshold: -1}}}\n":           `threshold -1`,
		"name: x\nanalyzers: {a: {type: balance, params: {treshold: 1}}}\n":             `field treshold not found`,
		"name: x\nmanagers: {m: {type: migrate, inputs: [nope]}}\n":                     `manager m: input "nope"`,
		"name: x\nmanagers: {m: {type: migrate, params: {max_moves: 0}}}\n":             `max_moves 0`,
		"name: x\nmanagers: {m: {type: migrate, params: {parallel: 0}}}\n":              `parallel 0 is not in 1..16`,
		"name: x\nmanagers: {m: {type: migrate, params: {parallel: 17}}}\n":             `parallel 17 is not in 1..16`,
		"name: x\nmanagers: {m: {type: migrate, params: {min_age: soon}}}\n":            `"soon" is not a duration`,
		"name: x\nmanagers: {m: {type: migrate, params: {crowd: -1}}}\n":                `crowd -1 is negative`,
		"name: x\nmanagers: {m: {type: migrate, params: {crowd: .nan}}}\n":              `crowd is NaN`,
		"name: x\nmanagers: {m: {type: migrate, params: {min_age: 250ms, crowd: 5}}}\n": `crowd_min_age 250ms is not under min_age 250ms`,
		"placement: static\n":              `name is missing`,
		"name: x\nperiod: 1ms\n":           `period 1ms`,
		"name: x\npreempt_after: 10ms\n":   `preempt_after 10ms is not 0 nor between 100ms and 24h0m0s`,
		"name: x\npreempt_after: 25h\n":    `preempt_after 25h0m0s`,
		"name: x\npreempt_after: -1s\n":    `"-1s" is not a duration`,
		"name: x\nplacment: round-robin\n": `field placment not found`,
	}
	for text, want := range cases {
		_, err := ParsePolicy([]byte(text))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one mentioning %s", text, err, want)
		}
	}
}

func jobs(n int, age time.Duration) []Job {
	var out []Job
	for i := 0; i < n; i++ {
		out = append(out, Job{ID: fmt.Sprintf("4.%d", i+1), Started: t0.Add(-age), RSSMB: 2, Runnable: 1})
	}
	return out
}

func TestBalanceSendsToTheNodeWithMostRoomPerCapacity(t *testing.T) {
	s := mustPolicy(t, "balance")
	snap := Snapshot{Now: t0, Self: Node{ID: "4", Capacity: 0.2, Load: 12 / 0.2},
		Peers: []Node{{ID: "1", Capacity: 0.8}, {ID: "2", Capacity: 0.4}, {ID: "3", Capacity: 0.4}},
		Jobs:  jobs(12, 10*time.Second)}
	moves := s.Decide(snap, rand.New(rand.NewSource(1)))
	// One round spreads the whole burst, as far as the gain goes: 5 jobs
	// for the 0.8-CPU node, 3 for each 0.4 and 1 left here (loads 6.25,
	// 7.5, 7.5 and 5 per unit of capacity; one more anywhere would not be
	// 0.25 below this node's).
	per := map[string]int{}
	for _, m := range moves {
		per[m.To]++
	}
	if len(moves) != 11 || per["1"] != 5 || per["2"] != 3 || per["3"] != 3 {
		t.Fatalf("moves per node %v (%d in all), want 5, 3, 3 (11): %v", per, len(moves), moves)
	}
	// 1/0.8 = 1.25 < 2.5: node 1 first; then node 1 at 2.5 ties 2 and 3
	// at 2.5, and the idle ones win: one job fills each node first.
	if moves[0].To != "1" || moves[1].To != "2" || moves[2].To != "3" {
		t.Fatalf("moves to %s, %s, %s, want 1, 2, 3: %v", moves[0].To, moves[1].To, moves[2].To, moves)
	}
	seen := map[string]bool{}
	for _, m := range moves {
		if seen[m.Job] {
			t.Fatalf("job %s moved twice in one round", m.Job)
		}
		seen[m.Job] = true
		if !strings.Contains(m.Why, "on node 4") {
			t.Fatalf("why %q does not say the node", m.Why)
		}
	}
	if !strings.Contains(moves[0].Why, "load 60.00 on node 4") {
		t.Fatalf("why %q does not say the load", moves[0].Why)
	}
}

func TestHeldYoungAndRecentJobsStay(t *testing.T) {
	s := mustPolicy(t, "balance")
	js := []Job{
		{ID: "a", Started: t0.Add(-time.Minute), Runnable: 1, Held: "pinned (run --pin)"},
		{ID: "b", Started: t0.Add(-100 * time.Millisecond), Runnable: 1},                           // too young
		{ID: "c", Started: t0.Add(-time.Minute), Runnable: 1, LastMoved: t0.Add(-5 * time.Second)}, // moved lately
		{ID: "d", Started: t0.Add(-time.Minute), Runnable: 0},                                      // sleeping
	}
	// Node 2 would have 3 with one more: a gain for a job, but its share
	// of a CPU grows only 4/3 times, too little for c, which just moved.
	snap := Snapshot{Now: t0, Self: Node{ID: "1", Capacity: 1, Load: 4}, Peers: []Node{{ID: "2", Capacity: 1, Load: 2}}, Jobs: js}
	if moves := s.Decide(snap, rand.New(rand.NewSource(1))); len(moves) != 0 {
		t.Fatalf("moved %v", moves)
	}
	snap.Jobs = append(snap.Jobs, Job{ID: "e", Started: t0.Add(-time.Minute), Runnable: 1})
	if moves := s.Decide(snap, rand.New(rand.NewSource(1))); len(moves) != 1 || moves[0].Job != "e" {
		t.Fatalf("moves %v, want only e", moves)
	}
}

// A round wakes when the first job too young to move becomes old enough:
// not for held jobs, nor for jobs old enough already, nor on a draining
// node (whose round is Drain's, which moves young jobs too).
func TestWakeWhenTheFirstYoungJobComesOfAge(t *testing.T) {
	s := mustPolicy(t, "balance") // min_age 250ms
	js := []Job{
		{ID: "old", Started: t0.Add(-time.Minute), Runnable: 1},
		{ID: "pinned", Started: t0.Add(-100 * time.Millisecond), Runnable: 1, Held: "pinned (run --pin)"},
		{ID: "young", Started: t0.Add(-50 * time.Millisecond), Runnable: 1},
		{ID: "younger", Started: t0, Runnable: 1},
	}
	snap := Snapshot{Now: t0, Self: Node{ID: "1", Capacity: 1, Load: 4}, Jobs: js}
	if got, want := s.Wake(snap), t0.Add(200*time.Millisecond); !got.Equal(want) {
		t.Fatalf("Wake = %v after now, want %v", got.Sub(t0), want.Sub(t0))
	}
	snap.Jobs = js[:2]
	if got := s.Wake(snap); !got.IsZero() {
		t.Fatalf("Wake with no young unheld job = %v, want none", got)
	}
	snap.Jobs, snap.Self.Draining = js, true
	if got := s.Wake(snap); !got.IsZero() {
		t.Fatalf("Wake on a draining node = %v, want none", got)
	}
	if got := mustPolicy(t, "static").Wake(Snapshot{Now: t0, Jobs: js}); !got.IsZero() {
		t.Fatalf("static's Wake = %v, want none: it never moves", got)
	}
}

// A job that moved lately to a slow node, idle then, leaves it within the
// hysteresis when a node where its share of a CPU at least doubles is
// free; the destination checks that gain again; and with the gain off
// (hysteresis_gain: 0), it stays.
func TestRecentJobMovesForALargeGain(t *testing.T) {
	s := mustPolicy(t, "balance")
	stuck := Job{ID: "4.3", Started: t0.Add(-50 * time.Second), Runnable: 1, LastMoved: t0.Add(-3 * time.Second)}
	snap := Snapshot{Now: t0, Self: Node{ID: "4", Capacity: 0.2, Load: 5},
		Peers: []Node{{ID: "2", Capacity: 0.4, Load: 2.5}, {ID: "3", Capacity: 0.4}}, Jobs: []Job{stuck}}
	moves := s.Decide(snap, rand.New(rand.NewSource(1)))
	if len(moves) != 1 || moves[0].To != "3" || moves[0].Gain != DefaultHysteresisGain {
		t.Fatalf("moves %v, want 4.3 to the idle node 3 (load 5 to 2.5), with the gain", moves)
	}
	if !strings.Contains(moves[0].Why, "moved 3s ago, and its CPU share grows 2.0 times") {
		t.Fatalf("why %q does not say why the hysteresis was passed", moves[0].Why)
	}
	// Node 3's load rose meanwhile: 5 vs 3.75 is a gain, not a doubling.
	err := Admit(moves[0], Node{ID: "3", Capacity: 0.4, Load: 1.25})
	if err == nil || !strings.Contains(err.Error(), "which moved lately: not 1.75 times below node 4's 5.00") {
		t.Fatalf("Admit = %v", err)
	}
	off, err := ParsePolicy([]byte(strings.Replace(Builtin["balance"], "max_moves: 16", "max_moves: 16, hysteresis_gain: 0", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if moves := off.Decide(snap, rand.New(rand.NewSource(1))); len(moves) != 0 {
		t.Fatalf("with hysteresis_gain 0, moved %v", moves)
	}
	if _, err := ParsePolicy([]byte(strings.Replace(Builtin["balance"], "max_moves: 16", "max_moves: 16, hysteresis_gain: 1.1", 1))); err == nil ||
		!strings.Contains(err.Error(), "hysteresis_gain 1.1 is under 1.5") {
		t.Fatalf("hysteresis_gain 1.1: %v", err)
	}
}

func TestCheapestJobMovesFirst(t *testing.T) {
	s := mustPolicy(t, "balance")
	js := []Job{
		{ID: "big", Started: t0.Add(-time.Minute), Runnable: 1, RSSMB: 900},
		{ID: "chatty", Started: t0.Add(-time.Minute), Runnable: 1, RSSMB: 5, SyscallsPerSec: 50000},
		{ID: "lean", Started: t0.Add(-time.Minute), Runnable: 1, RSSMB: 20},
	}
	snap := Snapshot{Now: t0, Self: Node{ID: "1", Capacity: 1, Load: 3}, Peers: []Node{{ID: "2", Capacity: 1}}, Jobs: js}
	moves := s.Decide(snap, rand.New(rand.NewSource(1)))
	if len(moves) != 1 || moves[0].Job != "lean" {
		t.Fatalf("moves %v, want one move of lean (3 vs 0: one move leaves 2 vs 1)", moves)
	}
}

func TestRecentMovesCountUntilTheyShow(t *testing.T) {
	s := mustPolicy(t, "balance")
	snap := Snapshot{Now: t0, Self: Node{ID: "1", Capacity: 1, Load: 2},
		Peers: []Node{{ID: "2", Capacity: 1, Load: 0, Received: t0.Add(-500 * time.Millisecond)}},
		Jobs:  jobs(2, time.Minute),
		// One job went to node 2 a second ago; node 2's load predates it.
		Recent: []Move{{Job: "x", To: "2", At: t0.Add(-time.Second), Runnable: 1}}}
	if moves := s.Decide(snap, rand.New(rand.NewSource(1))); len(moves) != 0 {
		t.Fatalf("2 here vs 0+1 pending there: no move is worth it, got %v", moves)
	}
	// Once node 2's load is newer than the move settles, it counts as is.
	snap.Peers[0].Received = t0.Add(-time.Second + MoveSettle)
	snap.Now = t0.Add(MoveSettle)
	if moves := s.Decide(snap, rand.New(rand.NewSource(1))); len(moves) != 1 {
		t.Fatalf("2 here vs 0 there: one move, got %v", moves)
	}
}

func TestUsheringMovesTheLargestThatFits(t *testing.T) {
	s := mustPolicy(t, "ushering")
	js := []Job{
		{ID: "small", Started: t0.Add(-time.Minute), RSSMB: 10},
		{ID: "grows", Started: t0.Add(-time.Minute), RSSMB: 200},
		{ID: "huge", Started: t0.Add(-time.Minute), RSSMB: 5000},
	}
	snap := Snapshot{Now: t0, Self: Node{ID: "1", Capacity: 1, MemFreeMB: 30},
		Peers: []Node{{ID: "2", Capacity: 1, MemFreeMB: 1000}, {ID: "3", Capacity: 1, MemFreeMB: 100}}, Jobs: js}
	moves := s.Decide(snap, rand.New(rand.NewSource(1)))
	if len(moves) != 1 || moves[0].Job != "grows" || moves[0].To != "2" || moves[0].Kind != "memory" {
		t.Fatalf("moves %v, want grows to 2", moves)
	}
	snap.Self.MemFreeMB = 100
	if moves := s.Decide(snap, rand.New(rand.NewSource(1))); len(moves) != 0 {
		t.Fatalf("enough memory, yet %v", moves)
	}
}

// A node that admits by memory requests, packed with jobs that each
// hold one, is not short of memory whatever its free memory says: no
// ushering. One job without a request, requests past the node's memory
// for jobs, or less memory in the node than its requests (its jobs'
// resident and its free memory, within the floor) make its free memory
// count again.
func TestUsheringLeavesJobsHeldToTheirRequests(t *testing.T) {
	s := mustPolicy(t, "ushering")
	js := []Job{
		{ID: "a", Started: t0.Add(-time.Minute), RSSMB: 224, MemReqMB: 256},
		{ID: "b", Started: t0.Add(-time.Minute), RSSMB: 224, MemReqMB: 256},
	}
	snap := Snapshot{Now: t0, Self: Node{ID: "4", Capacity: 0.2, MemFreeMB: 30, MemJobsMB: 512, MemHeldMB: 512},
		Peers: []Node{{ID: "1", Capacity: 0.8, MemFreeMB: 1000, MemJobsMB: 2048, MemHeldMB: 1024}}, Jobs: js}
	if moves := s.Decide(snap, rand.New(rand.NewSource(1))); len(moves) != 0 {
		t.Fatalf("a node packed by its jobs' requests ushers %v", moves)
	}
	for name, change := range map[string]func(*Snapshot){
		"a job without a request": func(x *Snapshot) {
			x.Jobs = append(x.Jobs, Job{ID: "c", Started: t0.Add(-time.Minute), RSSMB: 40})
		},
		"requests past its memory": func(x *Snapshot) { x.Self.MemHeldMB = 600 },
		"less memory than it admitted": func(x *Snapshot) { // jobs.memory_bytes past the node's, or others' processes
			x.Jobs[0].RSSMB, x.Jobs[1].RSSMB = 150, 150
		},
		"no admission by request": func(x *Snapshot) { x.Self.MemJobsMB, x.Self.MemHeldMB = 0, 0 },
	} {
		x := snap
		x.Jobs = slices.Clone(snap.Jobs)
		change(&x)
		if moves := s.Decide(x, rand.New(rand.NewSource(1))); len(moves) != 1 || moves[0].Kind != ProblemMemory {
			t.Errorf("%s: 30 MiB free, moves %v; want one for memory", name, moves)
		}
	}
}

func TestThresholdNeedsAGain(t *testing.T) {
	s := mustPolicy(t, "threshold")
	snap := Snapshot{Now: t0, Self: Node{ID: "1", Capacity: 1, Load: 1}, Peers: []Node{{ID: "2", Capacity: 1, Load: 0.5}}, Jobs: jobs(1, time.Minute)}
	if moves := s.Decide(snap, rand.New(rand.NewSource(1))); len(moves) != 0 {
		t.Fatalf("1 here, 1.5 there after: %v", moves)
	}
	snap.Self.Load, snap.Jobs = 2, jobs(2, time.Minute)
	moves := s.Decide(snap, rand.New(rand.NewSource(1)))
	if len(moves) != 1 || moves[0].To != "2" || !strings.Contains(moves[0].Why, "CPU use 200%") {
		t.Fatalf("moves %v", moves)
	}
}

// sim runs the same pure decisions on every node of a small cluster, one
// round a second, with loads known exactly, and returns the jobs per node
// and each job's number of moves.
func sim(t *testing.T, policy string, caps []float64, start map[int]int, rounds int) ([]int, map[string]int) {
	s := mustPolicy(t, policy)
	type jb struct {
		Job
		node int
	}
	var all []*jb
	for n, k := range start {
		for i := 0; i < k; i++ {
			all = append(all, &jb{Job: Job{ID: fmt.Sprintf("%d.%d", n, i), Started: t0, Runnable: 1, RSSMB: 4}, node: n})
		}
	}
	count := func() []int {
		c := make([]int, len(caps))
		for _, j := range all {
			c[j.node]++
		}
		return c
	}
	moves := map[string]int{}
	rng := rand.New(rand.NewSource(7))
	for r := 1; r <= rounds; r++ {
		now := t0.Add(time.Duration(r) * time.Second)
		c := count()
		for n := range caps {
			snap := Snapshot{Now: now, Self: Node{ID: fmt.Sprint(n), Capacity: caps[n], Load: float64(c[n]) / caps[n]}}
			for m := range caps {
				if m != n {
					snap.Peers = append(snap.Peers, Node{ID: fmt.Sprint(m), Capacity: caps[m], Load: float64(c[m]) / caps[m], Received: now})
				}
			}
			for _, j := range all {
				if j.node == n {
					snap.Jobs = append(snap.Jobs, j.Job)
				}
			}
			for _, mv := range s.Decide(snap, rng) {
				for _, j := range all {
					if j.ID == mv.Job {
						fmt.Sscan(mv.To, &j.node)
						j.LastMoved = now
						moves[j.ID]++
					}
				}
			}
			c = count()
		}
	}
	return count(), moves
}

func TestSimulatedHeterogeneousClusterSpreadsByCapacity(t *testing.T) {
	final, moves := sim(t, "balance", []float64{0.8, 0.4, 0.4, 0.2}, map[int]int{3: 12}, 60)
	// Loads per capacity: 5/0.8, 3/0.4, 3/0.4, 1/0.2 is the best split.
	if final[0] < 4 || final[3] > 2 {
		t.Fatalf("final %v: the fast node should hold most", final)
	}
	for id, n := range moves {
		if n > 1 {
			t.Fatalf("job %s moved %d times: %v (final %v)", id, n, moves, final)
		}
	}
}

func TestSimulatedEqualClusterNoPingPong(t *testing.T) {
	final, moves := sim(t, "balance", []float64{0.4, 0.4, 0.4, 0.4}, map[int]int{0: 8}, 60)
	for n, c := range final {
		if c != 2 {
			t.Fatalf("node %d holds %d: %v", n, c, final)
		}
	}
	total := 0
	for _, n := range moves {
		total += n
	}
	if total != 6 {
		t.Fatalf("%d moves, want 6 (each of the 6 extra jobs once): %v", total, moves)
	}
	// Balanced from the start: nothing moves.
	_, moves = sim(t, "balance", []float64{0.4, 0.4, 0.4, 0.4}, map[int]int{0: 2, 1: 2, 2: 2, 3: 2}, 60)
	if len(moves) != 0 {
		t.Fatalf("balanced cluster moved %v", moves)
	}
}

func TestStaticNeverMoves(t *testing.T) {
	_, moves := sim(t, "static", []float64{0.8, 0.2}, map[int]int{1: 6}, 30)
	if len(moves) != 0 {
		t.Fatalf("static moved %v", moves)
	}
}

func TestPlacements(t *testing.T) {
	nodes := []NodeLoad{{ID: "1", Capacity: 1, Load: 0}, {ID: "2", Capacity: 1, Load: 3}, {ID: "3", Capacity: 1, Load: 0}}
	rr, next, err := PlaceRoundRobin(nodes, 4, resources.Request{}, 2)
	if err != nil || strings.Join(rr, ",") != "3,1,2,3" || next != 0 {
		t.Fatalf("round-robin %v %d %v", rr, next, err)
	}
	a, _ := PlaceRandomTwo(nodes, 30, resources.Request{}, rand.New(rand.NewSource(5)))
	b, _ := PlaceRandomTwo(nodes, 30, resources.Request{}, rand.New(rand.NewSource(5)))
	if strings.Join(a, ",") != strings.Join(b, ",") {
		t.Fatal("random-two is not deterministic for a seed")
	}
	c := count(a)
	// Two choices keep the loaded node 2 light: it wins only a draw
	// against itself, which cannot happen.
	if c["2"] > c["1"] || c["2"] > c["3"] {
		t.Fatalf("random-two put %v", c)
	}
	if _, _, err := Place("nearest", nodes, 1, resources.Request{}, nil, 0); err == nil {
		t.Fatal("unknown placement accepted")
	}
}

// The destination judges a move again with its own load now: two sources
// that saw the same idle node in their load vectors do not both send it a
// job.
func TestAdmitStopsHerding(t *testing.T) {
	mv := Move{Job: "1.2", To: "3", From: "2", Kind: "cpu", Runnable: 1, SrcLoad: 2 / 0.6, Threshold: 0.25}
	idle := Node{ID: "3", Capacity: 0.6, Load: 0}
	if err := Admit(mv, idle); err != nil {
		t.Fatalf("an idle node refused: %v", err)
	}
	// Node 3 already runs two jobs (its vector entry said 0).
	busy := Node{ID: "3", Capacity: 0.6, Load: 2 / 0.6}
	err := Admit(mv, busy)
	if err == nil || err.Error() != "node 3 would have load 5.00 with job 1.2, not more than 0.25 below node 2's 3.33" {
		t.Fatalf("Admit = %v", err)
	}
	mem := Move{Job: "1.5", To: "3", Kind: "memory", RSSMB: 50, KeepFreeMB: 64}
	if err := Admit(mem, Node{ID: "3", MemFreeMB: 100}); err == nil || !strings.Contains(err.Error(), "50 MiB free with job 1.5, under the 64 MiB") {
		t.Fatalf("Admit(memory) = %v", err)
	}
	if err := Admit(Move{Job: "1.5", Kind: "disk"}, idle); err == nil || !strings.Contains(err.Error(), `unknown kind "disk"`) {
		t.Fatalf("Admit(disk) = %v", err)
	}
}

// A round's moves run in lanes: one node's moves in one lane, in order;
// at most parallel lanes, each destination in one of them.
func TestLanesSpreadARoundOverItsDestinations(t *testing.T) {
	var moves []Move
	for i, to := range []string{"1", "2", "3", "1", "5", "2", "6", "1"} {
		moves = append(moves, Move{Job: fmt.Sprintf("4.%d", i+1), To: to})
	}
	got := Lanes(moves, 3)
	want := [][]string{{"4.1", "4.4", "4.8"}, {"4.2", "4.5", "4.6"}, {"4.3", "4.7"}}
	if len(got) != len(want) {
		t.Fatalf("%d lanes, want %d: %v", len(got), len(want), got)
	}
	for i, l := range got {
		var ids []string
		for _, m := range l {
			ids = append(ids, m.Job)
		}
		if !slices.Equal(ids, want[i]) {
			t.Fatalf("lane %d: %v, want %v", i, ids, want[i])
		}
	}
	lane := map[string]int{}
	for i, l := range got {
		for _, m := range l {
			if j, ok := lane[m.To]; ok && j != i {
				t.Fatalf("node %s in lanes %d and %d", m.To, j, i)
			}
			lane[m.To] = i
		}
	}
	if l := Lanes(moves, 0); len(l) != 1 || len(l[0]) != len(moves) {
		t.Fatalf("parallel 0: %v, want one lane of all", l)
	}
	if Lanes(nil, 4) != nil {
		t.Fatal("no moves, yet lanes")
	}
	if p := mustPolicy(t, "balance").Parallel(); p != DefaultParallel {
		t.Fatalf("balance runs %d at once, want %d", p, DefaultParallel)
	}
	if p := mustPolicy(t, "static").Parallel(); p != 1 {
		t.Fatalf("static runs %d at once, want 1", p)
	}
}

// lazy_mb: a job with at least that much resident memory moves lazily,
// a smaller one eagerly; 0 keeps every move eager.
func TestLazyMBMovesLargeJobsLazily(t *testing.T) {
	text := strings.Replace(Builtin["balance"], "max_moves: 16,", "max_moves: 16, lazy_mb: 100,", 1)
	s, err := ParsePolicy([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	js := jobs(2, 10*time.Second)
	js[0].RSSMB, js[1].RSSMB = 99, 100
	snap := Snapshot{Now: t0, Self: Node{ID: "4", Capacity: 1, Load: 8},
		Peers: []Node{{ID: "1", Capacity: 1}, {ID: "2", Capacity: 1}}, Jobs: js}
	moves := s.Decide(snap, rand.New(rand.NewSource(1)))
	lazy := map[string]bool{}
	for _, m := range moves {
		lazy[m.Job] = m.Lazy
		if m.Lazy != strings.Contains(m.Why, "lazily") {
			t.Fatalf("move %s: lazy %v, why %q", m.Job, m.Lazy, m.Why)
		}
	}
	if len(moves) != 2 || lazy["4.1"] || !lazy["4.2"] {
		t.Fatalf("moves %+v: want 4.1 (99 MiB) eager and 4.2 (100 MiB) lazy", moves)
	}
	for _, m := range mustPolicy(t, "balance").Decide(snap, rand.New(rand.NewSource(1))) {
		if m.Lazy {
			t.Fatalf("balance without lazy_mb moved %s lazily", m.Job)
		}
	}
	if _, err := ParsePolicy([]byte(strings.Replace(text, "lazy_mb: 100", "lazy_mb: -1", 1))); err == nil || !strings.Contains(err.Error(), "lazy_mb -1 is negative") {
		t.Fatalf("lazy_mb -1: %v", err)
	}
}
