package sched

import (
	"math/rand"
	"strings"
	"testing"
	"time"
)

// turnSnap is node 1 of 0.2 CPU running two jobs, 1.1 (the most CPU time,
// 1.0 s) and 1.2 (0.6 s), beside node 2 of 0.2 CPU running one job that
// has had least CPU-seconds: the 8-jobs-on-6-nodes case of roam bench
// lvm once spread, where only turns help.
func turnSnap(least float64) Snapshot {
	return Snapshot{Now: t0, Self: Node{ID: "1", Capacity: 0.2, Load: 2 / 0.2, MemFreeMB: 4000},
		Peers: []Node{{ID: "2", Capacity: 0.2, Load: 1 / 0.2, MemFreeMB: 4000, Received: t0, Least: least}},
		Jobs: []Job{
			{ID: "1.2", Started: t0.Add(-time.Minute), RSSMB: 5, Runnable: 1, Attained: 0.6},
			{ID: "1.1", Started: t0.Add(-time.Minute), RSSMB: 5, Runnable: 1, Attained: 1.0},
		}}
}

// lead is what node 2's job gains on a job of node 1 in turn_every, at
// 0.2 against 0.1 CPU (0.6 CPU-s in 6 s).
var lead = DefaultTurnEvery.Seconds() * (0.2 - 0.1)

// The doubled node hands its most advanced job to a node as loaded after
// the move as it is now, whose job leads the one left behind by what it
// gains on it in turn_every, and not before.
func TestTurnSendsTheMostAdvancedJobToANodeFurtherAhead(t *testing.T) {
	s := mustPolicy(t, "balance")
	moves := s.Decide(turnSnap(0.6+lead+0.01), rand.New(rand.NewSource(1)))
	if len(moves) != 1 {
		t.Fatalf("moves %+v, want one turn", moves)
	}
	mv := moves[0]
	if mv.Kind != ProblemTurn || mv.Job != "1.1" || mv.To != "2" || mv.Attained != 1.0 || mv.Behind != 0.6 {
		t.Fatalf("move %+v, want job 1.1 (1.0 CPU-s) to node 2 as a turn, 0.6 left behind", mv)
	}
	if !strings.Contains(mv.Why, "1.1") {
		t.Fatalf("why %q does not name the job", mv.Why)
	}
	// A hundredth short of the lead.
	if moves := s.Decide(turnSnap(0.6+lead-0.01), rand.New(rand.NewSource(1))); len(moves) != 0 {
		t.Fatalf("turn with a lead of %.2f CPU-s: %+v", lead-0.01, moves)
	}
	// A smoothed load says a little more than one job: still one.
	for _, l := range []float64{1.2, 1.01} {
		snap := turnSnap(0.6 + lead + 0.01)
		snap.Peers[0].Load = l / 0.2
		if moves := s.Decide(snap, rand.New(rand.NewSource(1))); len(moves) != 1 || moves[0].Kind != ProblemTurn {
			t.Fatalf("target's load %.1f threads: %+v, want a turn", l, moves)
		}
	}
	// A node that says nothing of its jobs' CPU time (an older roam) is
	// not a turn's target.
	if moves := s.Decide(turnSnap(0), rand.New(rand.NewSource(1))); len(moves) != 0 {
		t.Fatalf("turn to a node without Least: %+v", moves)
	}
}

// A turn never loads its target more than its source was: a node running
// two jobs as well is no target, however far ahead.
func TestTurnNeverLoadsTheTargetMore(t *testing.T) {
	s := mustPolicy(t, "balance")
	snap := turnSnap(100)
	snap.Peers[0].Load = 2 / 0.2
	if moves := s.Decide(snap, rand.New(rand.NewSource(1))); len(moves) != 0 {
		t.Fatalf("turn to a node as loaded: %+v", moves)
	}
	// A node twice as fast running four jobs gives each the share a job
	// gets here with two: no turn either (it would have 12.5 with one
	// more).
	snap.Peers[0] = Node{ID: "2", Capacity: 0.4, Load: 4 / 0.4, Received: t0, Least: 100, MemFreeMB: 4000}
	if moves := s.Decide(snap, rand.New(rand.NewSource(1))); len(moves) != 0 {
		t.Fatalf("turn to a node with the same share: %+v", moves)
	}
}

// Only the most advanced job turns: if it may not move (held, or too
// young), sending the other would leave the most advanced alone here.
func TestTurnMovesOnlyTheMostAdvancedJob(t *testing.T) {
	s := mustPolicy(t, "balance")
	for _, change := range []func(*Job){
		func(j *Job) { j.Held = "pinned (run --pin)" },
		func(j *Job) { j.Started = t0 },
	} {
		snap := turnSnap(100)
		change(&snap.Jobs[1])
		if moves := s.Decide(snap, rand.New(rand.NewSource(1))); len(moves) != 0 {
			t.Fatalf("moves %+v, want none: the most advanced job may not move", moves)
		}
	}
}

// A real imbalance comes first: with an idle node, a job goes there as a
// CPU move, and no turn follows in the round (the node is left with one
// job).
func TestBalanceBeforeTurns(t *testing.T) {
	s := mustPolicy(t, "balance")
	snap := turnSnap(100)
	snap.Peers = append(snap.Peers, Node{ID: "3", Capacity: 0.2, MemFreeMB: 4000, Received: t0})
	moves := s.Decide(snap, rand.New(rand.NewSource(1)))
	if len(moves) != 1 || moves[0].Kind != ProblemCPU || moves[0].To != "3" {
		t.Fatalf("moves %+v, want one CPU move to the idle node 3", moves)
	}
}

// After a turn, the target does not send a job back: its most advanced
// job is its own, ahead of the one job left at the source, never behind.
func TestTurnIsNotAnsweredByATurnBack(t *testing.T) {
	s := mustPolicy(t, "balance")
	mv := s.Decide(turnSnap(0.6+2*lead), rand.New(rand.NewSource(1)))[0]
	// Node 2 once the job arrived: 2.1 (its own, 1.5 CPU-s) and 1.1;
	// node 1 runs 1.2 alone.
	back := Snapshot{Now: t0.Add(3 * time.Second), Self: Node{ID: "2", Capacity: 0.2, Load: 2 / 0.2, MemFreeMB: 4000},
		Peers: []Node{{ID: "1", Capacity: 0.2, Load: 1 / 0.2, MemFreeMB: 4000, Received: t0.Add(3 * time.Second), Least: 0.6}},
		Jobs: []Job{
			{ID: "2.1", Started: t0.Add(-time.Minute), RSSMB: 5, Runnable: 1, Attained: 0.6 + 2*lead},
			{ID: mv.Job, Started: t0.Add(-time.Minute), LastMoved: t0, Moves: 1, RSSMB: 5, Runnable: 1, Attained: mv.Attained},
		}}
	if moves := s.Decide(back, rand.New(rand.NewSource(1))); len(moves) != 0 {
		t.Fatalf("the target answered the turn with %+v", moves)
	}
}

// The destination judges a turn against its own jobs' CPU time, the jobs
// of the moves it admitted and has not received counted in: the lead
// must be there, and a second turn is refused once the first is taken
// (it would load the node more than its source).
func TestAdmitJudgesATurnByTheLead(t *testing.T) {
	mv := Move{Job: "1.1", From: "1", To: "2", Kind: ProblemTurn, RSSMB: 5, Runnable: 1, SrcLoad: 10, Attained: 1.0, Behind: 0.6, At: t0, TurnEvery: DefaultTurnEvery}
	self := Node{ID: "2", Capacity: 0.2, Load: 5, MemFreeMB: 4000, Least: 0.6 + lead - 0.01}
	var l Ledger
	if ans := l.Admit(mv, self, t0); ans.Refused == nil || !strings.Contains(ans.Refused.Error(), "lead") || ans.Least != self.Least {
		t.Fatalf("turn a hundredth short of the lead: %+v", ans)
	}
	self.Least = 0.6 + lead + 0.01
	ans := l.Admit(mv, self, t0)
	if ans.Refused != nil || ans.Load != 10 || ans.Least != 1.0 {
		t.Fatalf("turn with the lead: %+v, want taken, load 10 and least 1.0 (the job coming)", ans)
	}
	other := mv
	other.Job, other.From = "3.1", "3"
	if ans := l.Admit(other, self, t0); ans.Refused == nil {
		t.Fatal("a second turn to a node that took one was admitted")
	}
	// The move's own numbers are checked like the others'.
	bad := mv
	bad.Job, bad.Behind = "4.1", -1
	if ans := l.Admit(bad, self, t0); ans.Refused == nil || !strings.Contains(ans.Refused.Error(), "behind") {
		t.Fatalf("a turn with a negative behind: %+v", ans)
	}
}

// A refused turn's answer carries the destination's least CPU time into
// the source's view (Declined, ApplyHeard): its next round does not ask
// the same node again until its vector says the lead is there.
func TestDeclinedTurnUpdatesTheView(t *testing.T) {
	var l Ledger
	mv := Move{Job: "1.1", From: "1", To: "2", Kind: ProblemTurn, RSSMB: 5, Runnable: 1, SrcLoad: 10, Attained: 1.0, Behind: 0.6, At: t0, TurnEvery: DefaultTurnEvery}
	l.Started([]Move{mv})
	l.Forget(mv)
	l.Declined(mv, Node{ID: "2", Capacity: 0.2, Load: 5, MemFreeMB: 4000, Least: 0.8}, t0.Add(time.Millisecond))
	snap := turnSnap(0.6 + 2*lead)
	if moves := mustPolicy(t, "balance").Decide(snap, rand.New(rand.NewSource(1))); len(moves) != 1 {
		t.Fatalf("before the answer: %+v, want a turn", moves)
	}
	l.ApplyHeard(snap.Peers)
	if snap.Peers[0].Least != 0.8 {
		t.Fatalf("view of node 2 has least %v, want 0.8 from its answer", snap.Peers[0].Least)
	}
	if moves := mustPolicy(t, "balance").Decide(snap, rand.New(rand.NewSource(1))); len(moves) != 0 {
		t.Fatalf("asked again: %+v", moves)
	}
}

// A job that moved, or whose move failed (Ledger.ApplyFailures sets its
// LastMoved), within turn_every does not turn: a turn that fails is not
// tried again every round. Nor does a job too large to move in a tenth
// of turn_every.
func TestTurnWaitsAfterAMoveAndSparesLargeJobs(t *testing.T) {
	s := mustPolicy(t, "balance")
	snap := turnSnap(100)
	snap.Jobs[1].LastMoved = t0.Add(-DefaultTurnEvery + time.Second)
	if moves := s.Decide(snap, rand.New(rand.NewSource(1))); len(moves) != 0 {
		t.Fatalf("a job that moved %v ago turned: %+v", DefaultTurnEvery-time.Second, moves)
	}
	snap.Jobs[1].LastMoved = t0.Add(-DefaultTurnEvery)
	if moves := s.Decide(snap, rand.New(rand.NewSource(1))); len(moves) != 1 {
		t.Fatalf("a job that moved turn_every ago: %+v, want a turn", moves)
	}
	snap = turnSnap(100)
	snap.Jobs[1].RSSMB = TurnMaxRSSMB + 1
	if moves := s.Decide(snap, rand.New(rand.NewSource(1))); len(moves) != 0 {
		t.Fatalf("a job of %d MiB turned: %+v", TurnMaxRSSMB+1, moves)
	}
}

// A turn's target keeps TurnKeepFreeMB free with the job: it always runs
// jobs already.
func TestTurnKeepsMemoryFree(t *testing.T) {
	s := mustPolicy(t, "balance")
	snap := turnSnap(100)
	snap.Peers[0].MemFreeMB = 5 + TurnKeepFreeMB - 1
	if moves := s.Decide(snap, rand.New(rand.NewSource(1))); len(moves) != 0 {
		t.Fatalf("a turn left %d MiB free at its target: %+v", TurnKeepFreeMB-1, moves)
	}
}

// turn_every: 0 turns turns off; it is a duration up to MaxTurnEvery.
func TestTurnEveryIsAPolicyParameter(t *testing.T) {
	off, err := ParsePolicy([]byte("name: x\nanalyzers: {b: {type: balance, params: {turn_every: 0s}}}\nmanagers: {m: {type: migrate, inputs: [b]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if moves := off.Decide(turnSnap(100), rand.New(rand.NewSource(1))); len(moves) != 0 {
		t.Fatalf("turn_every 0 turned: %+v", moves)
	}
	slow, err := ParsePolicy([]byte("name: x\nanalyzers: {b: {type: balance, params: {turn_every: 60s}}}\nmanagers: {m: {type: migrate, inputs: [b]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	// A lead of 0.6 CPU-s is what 6 s give, not 60 s.
	if moves := slow.Decide(turnSnap(0.6+lead+0.01), rand.New(rand.NewSource(1))); len(moves) != 0 {
		t.Fatalf("turn_every 60s turned with the lead of 6 s: %+v", moves)
	}
	if moves := slow.Decide(turnSnap(0.6+10*lead+0.01), rand.New(rand.NewSource(1))); len(moves) != 1 || moves[0].TurnEvery != time.Minute {
		t.Fatalf("turn_every 60s: %+v, want a turn that says 1m", moves)
	}
	for bad, want := range map[string]string{"-1s": `"-1s"`, "2h": "turn_every 2h0m0s"} {
		_, err := ParsePolicy([]byte("name: x\nanalyzers: {b: {type: balance, params: {turn_every: " + bad + "}}}\n"))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("turn_every %s: %v, want an error naming %s", bad, err, want)
		}
	}
}

// A turn's numbers are checked as every move's: CPU times up to
// MaxCPUSeconds (a node's Least takes them, and its load message would
// otherwise be refused by every peer), and a turn_every.
func TestTurnMoveCheck(t *testing.T) {
	ok := Move{Job: "1.1", From: "1", To: "2", Kind: ProblemTurn, Runnable: 1, SrcLoad: 10, Attained: 1, Behind: 0.5, TurnEvery: DefaultTurnEvery}
	if err := ok.Check(); err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(*Move){
		"attained":    func(m *Move) { m.Attained = MaxCPUSeconds * 2 },
		"behind":      func(m *Move) { m.Behind = -1 },
		"turn_every":  func(m *Move) { m.TurnEvery = 0 },
		"turn_every ": func(m *Move) { m.TurnEvery = MaxTurnEvery + 1 },
	} {
		m := ok
		change(&m)
		if err := m.Check(); err == nil {
			t.Errorf("%s: %+v passed", name, m)
		}
	}
}
