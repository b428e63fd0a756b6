package sched

import (
	"errors"
	"fmt"
	"math/rand"
	"reflect"
	"slices"
	"testing"
	"time"
)

// cluster is an in-process harness of several nodes, each with its own
// policy and ledger, driven on logical time: a round is every node
// deciding from its own view (its load vector, as old as received says),
// then every move asked of its destination, in order of the sources.
type cluster struct {
	t     *testing.T
	nodes []*simNode
	// received is when each node's load vector entries arrived: the loads
	// all nodes see of their peers are those of that moment.
	received time.Time
	vector   map[string]Node
}

type simNode struct {
	id     string
	pol    *Scheduler
	ledger Ledger
	self   Node // measured: the jobs it runs now
	jobs   []Job
}

func newCluster(t *testing.T, policy string, caps map[string]float64, running map[string]int, at time.Time) *cluster {
	c := &cluster{t: t, received: at, vector: map[string]Node{}}
	for _, id := range []string{"1", "2", "3", "4", "5"} {
		cp, ok := caps[id]
		if !ok {
			continue
		}
		n := &simNode{id: id, pol: mustPolicy(t, policy)}
		for i := 0; i < running[id]; i++ {
			n.jobs = append(n.jobs, Job{ID: fmt.Sprintf("%s.%d", id, i+1), Started: at.Add(-time.Minute), Runnable: 1, RSSMB: 10})
		}
		n.self = Node{ID: id, Capacity: cp, Load: float64(running[id]) / cp, MemFreeMB: 1000}
		c.nodes = append(c.nodes, n)
		c.vector[id] = Node{ID: id, Capacity: cp, Load: n.self.Load, MemFreeMB: 1000, Received: at}
	}
	return c
}

func (c *cluster) node(id string) *simNode {
	for _, n := range c.nodes {
		if n.id == id {
			return n
		}
	}
	c.t.Fatalf("no node %s", id)
	return nil
}

// decide is node n's side of a round at now, as the agent does it: the
// vector's peers with heard loads applied, its failures and recent moves.
func (c *cluster) decide(n *simNode, now time.Time) []Move {
	snap := Snapshot{Now: now, Self: n.self, Jobs: append([]Job(nil), n.jobs...)}
	for _, p := range c.nodes {
		if p.id != n.id {
			snap.Peers = append(snap.Peers, c.vector[p.id])
		}
	}
	n.ledger.ApplyHeard(snap.Peers)
	var here []string
	for _, j := range n.jobs {
		here = append(here, j.ID)
	}
	n.ledger.ApplyFailures(snap.Jobs, here)
	snap.Recent = n.ledger.Recent(now)
	moves := n.pol.Decide(snap, rand.New(rand.NewSource(1)))
	n.ledger.Started(moves)
	return moves
}

type asked struct {
	mv  Move
	ans AdmitAnswer
}

// round has every node decide at now, then asks each destination (in the
// order of the sources) to admit the moves; a refusal is forgotten by the
// source and its answer heard. No job arrives: moving it is not modelled.
func (c *cluster) round(now time.Time) []asked {
	var all []Move
	for _, n := range c.nodes {
		all = append(all, c.decide(n, now)...)
	}
	var out []asked
	for _, mv := range all {
		dst, src := c.node(mv.To), c.node(mv.From)
		ans := dst.ledger.Admit(mv, dst.self, now)
		if ans.Refused != nil {
			src.ledger.Forget(mv)
			src.ledger.Heard(Node{ID: mv.To, Load: ans.Load, MemFreeMB: ans.MemFreeMB, Least: ans.Least}, now)
		}
		out = append(out, asked{mv, ans})
	}
	for _, n := range c.nodes {
		n.ledger.Finished(false, now, time.Time{})
	}
	return out
}

// Two busy nodes see the same idle node in their load vectors and both
// decide to send it a job in the same round; the idle node takes the
// first and refuses the second, whose source then believes the answer's
// load over its vector and does not try again.
func TestLedgerStopsHerding(t *testing.T) {
	c := newCluster(t, "balance", map[string]float64{"1": 1, "2": 1, "3": 1}, map[string]int{"1": 2, "2": 2}, t0.Add(-500*time.Millisecond))
	res := c.round(t0)
	if len(res) != 2 || res[0].mv.From != "1" || res[1].mv.From != "2" || res[0].mv.To != "3" || res[1].mv.To != "3" {
		t.Fatalf("moves %+v, want one from each of 1 and 2, both to the idle node 3", res)
	}
	admitted := 0
	for _, r := range res {
		if r.ans.Refused == nil {
			admitted++
		}
	}
	if admitted != 1 || res[0].ans.Refused != nil {
		t.Fatalf("answers %+v: want only the first move admitted", res)
	}
	// Node 3's answer to the second counts the first: load 0 + 1 job.
	if got := res[1].ans.Load; got != 1 {
		t.Fatalf("refusal's load %v, want 1 (the admitted move counted in)", got)
	}
	if got := res[1].ans.MemFreeMB; got != 990 {
		t.Fatalf("refusal's free memory %v, want 990 (1000 minus the admitted job's 10)", got)
	}
	// A second later node 3's vector entry is still the old one; node 2
	// believes what node 3 answered and sends nothing.
	if moves := c.decide(c.node("2"), t0.Add(time.Second)); len(moves) != 0 {
		t.Fatalf("node 2 sent %v again to a node that refused it", moves)
	}
	// Without the heard load, it would have.
	var fresh Ledger
	c.node("2").ledger = fresh
	if moves := c.decide(c.node("2"), t0.Add(time.Second)); len(moves) != 1 || moves[0].To != "3" {
		t.Fatalf("control: from the vector alone node 2 decided %v, want a move to 3", moves)
	}
}

func cpuMove(job, from string) Move {
	return Move{Job: job, From: from, To: "3", Kind: ProblemCPU, Runnable: 1, RSSMB: 100, SrcLoad: 2, Threshold: 0.25}
}

// An admitted move counts in the destination's load until its job
// arrives, or until its deadline if it never does.
func TestLedgerReservationEndsOnArrivalOrDeadline(t *testing.T) {
	idle := Node{ID: "3", Capacity: 1, Load: 0, MemFreeMB: 1000}
	first, second := cpuMove("1.1", "1"), cpuMove("2.1", "2")

	t.Run("arrived", func(t *testing.T) {
		var l Ledger
		if ans := l.Admit(first, idle, t0); ans.Refused != nil || ans.Load != 1 || ans.MemFreeMB != 900 {
			t.Fatalf("first: %+v, want taken, load 1 and 900 MiB free with it", ans)
		}
		if ans := l.Admit(second, idle, t0.Add(time.Second)); ans.Refused == nil {
			t.Fatal("second admitted while the first is reserved")
		}
		// The job came (and ended since: the probe sees none).
		l.Arrived(first.Job)
		if ans := l.Admit(second, idle, t0.Add(2*time.Second)); ans.Refused != nil || ans.Load != 1 {
			t.Fatalf("after the first arrived: %+v, want the second taken, load 1", ans)
		}
	})

	t.Run("never arrives", func(t *testing.T) {
		var l Ledger
		l.Admit(first, idle, t0)
		deadline := t0.Add(AdmitHold)
		for _, at := range []time.Time{deadline.Add(-time.Nanosecond), deadline} {
			if got := l.Reserved(idle, at); got.Load != 1 || got.MemFreeMB != 900 {
				t.Fatalf("at deadline%+v: %+v, want the move counted (load 1, 900 MiB)", at.Sub(deadline), got)
			}
			if ans := l.Admit(second, idle, at); ans.Refused == nil {
				t.Fatalf("at deadline%+v: second admitted while the first is reserved", at.Sub(deadline))
			}
		}
		after := deadline.Add(time.Nanosecond)
		if got := l.Reserved(idle, after); got.Load != 0 || got.MemFreeMB != 1000 {
			t.Fatalf("just after the deadline: %+v, want the move no longer counted", got)
		}
		if ans := l.Admit(second, idle, after); ans.Refused != nil || ans.Load != 1 {
			t.Fatalf("just after the deadline: %+v, want the second taken, load 1", ans)
		}
	})
}

// A load heard in an answer replaces the vector's until the vector has a
// newer entry; then it is forgotten.
func TestLedgerHeardLoadsUntilTheVectorCatchesUp(t *testing.T) {
	vector := Node{ID: "3", Capacity: 1, Load: 0.5, MemFreeMB: 700}
	cases := []struct {
		name     string
		heardAt  time.Time
		received time.Time
		used     bool
	}{
		{"heard after the vector's entry", t0, t0.Add(-time.Second), true},
		{"heard with the vector's entry", t0, t0, false},
		{"heard before the vector's entry", t0, t0.Add(time.Second), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var l Ledger
			l.Heard(Node{ID: "3", Load: 2, MemFreeMB: 100}, tc.heardAt)
			p := vector
			p.Received = tc.received
			peers := []Node{{ID: "2", Capacity: 1, Load: 1, Received: tc.received}, p}
			l.ApplyHeard(peers)
			if peers[0].Load != 1 {
				t.Fatalf("node 2, never heard, became %+v", peers[0])
			}
			want := p
			if tc.used {
				want = Node{ID: "3", Capacity: 1, Load: 2, MemFreeMB: 100, Received: tc.heardAt}
			}
			if peers[1] != want {
				t.Fatalf("node 3 is %+v, want %+v", peers[1], want)
			}
			// An entry the vector caught up with is gone: even an older
			// entry (a peer list from before) is no longer replaced.
			old := []Node{{ID: "3", Capacity: 1, Load: 0.5, Received: t0.Add(-time.Hour)}}
			l.ApplyHeard(old)
			if got := old[0].Load == 2; got != tc.used {
				t.Fatalf("heard load still applied: %v, want %v", got, tc.used)
			}
		})
	}
	// A heard load of a node absent from this round's peers waits.
	var l Ledger
	l.Heard(Node{ID: "4", Load: 3}, t0)
	l.ApplyHeard([]Node{{ID: "3", Received: t0.Add(time.Second)}})
	later := []Node{{ID: "4", Received: t0.Add(-time.Second)}}
	if l.ApplyHeard(later); later[0].Load != 3 {
		t.Fatalf("heard load of node 4 lost while it was not a peer: %+v", later[0])
	}
}

func TestLedgerRecentMoves(t *testing.T) {
	mv := Move{Job: "1.1", To: "3", At: t0}
	cases := []struct {
		at   time.Duration // after the move
		kept bool
	}{
		{0, true},
		{RecentWindow - time.Nanosecond, true},
		{RecentWindow, false},
		{RecentWindow + time.Second, false},
	}
	for _, tc := range cases {
		var l Ledger
		l.Started([]Move{mv})
		got := l.Recent(t0.Add(tc.at))
		if kept := len(got) == 1 && reflect.DeepEqual(got[0], mv); kept != tc.kept {
			t.Errorf("%s after the move: recent %v, kept %v, want %v", tc.at, got, kept, tc.kept)
		}
		// Once dropped, it stays dropped.
		if again := l.Recent(t0); len(again) == 1 != tc.kept {
			t.Errorf("%s after the move: then at the move's time: %v", tc.at, again)
		}
	}

	forget := []struct {
		name string
		mv   Move
		kept bool
	}{
		{"the same move", mv, false},
		{"the job to another node", Move{Job: "1.1", To: "2", At: t0}, true},
		{"the job to the node another time", Move{Job: "1.1", To: "3", At: t0.Add(time.Second)}, true},
		{"another job", Move{Job: "1.2", To: "3", At: t0}, true},
	}
	for _, tc := range forget {
		var l Ledger
		other := Move{Job: "1.9", To: "3", At: t0}
		l.Started([]Move{other, mv})
		l.Forget(tc.mv)
		got := l.Recent(t0)
		if kept := len(got) == 2; kept != tc.kept || !reflect.DeepEqual(got[0], other) {
			t.Errorf("forget %s: recent %v, want the move kept %v", tc.name, got, tc.kept)
		}
		// Recent is a copy.
		got[0].To = "x"
		if l.Recent(t0)[0].To != "3" {
			t.Fatal("Recent returned the ledger's own slice")
		}
	}
}

func TestLedgerFailedMovesCountAsMoves(t *testing.T) {
	failedAt := t0.Add(-time.Second)
	cases := []struct {
		name      string
		failed    bool
		lastMoved time.Time
		here      bool
		want      time.Time
	}{
		{"failed, never moved", true, time.Time{}, true, failedAt},
		{"failed after it moved", true, t0.Add(-time.Minute), true, failedAt},
		{"moved after it failed", true, t0.Add(-time.Millisecond), true, t0.Add(-time.Millisecond)},
		{"never failed", false, t0.Add(-time.Minute), true, t0.Add(-time.Minute)},
	}
	for _, tc := range cases {
		var l Ledger
		if tc.failed {
			l.Failed("1.1", failedAt)
		}
		js := []Job{{ID: "1.1", LastMoved: tc.lastMoved}, {ID: "1.2"}}
		l.ApplyFailures(js, []string{"1.1", "1.2"})
		if !js[0].LastMoved.Equal(tc.want) || !js[1].LastMoved.IsZero() {
			t.Errorf("%s: last moved %v (other job %v), want %v", tc.name, js[0].LastMoved, js[1].LastMoved, tc.want)
		}
	}

	// The failures of jobs gone from the node are forgotten.
	var l Ledger
	l.Failed("1.1", failedAt)
	l.ApplyFailures(nil, []string{"1.2"})
	js := []Job{{ID: "1.1"}}
	l.ApplyFailures(js, []string{"1.1"})
	if !js[0].LastMoved.IsZero() {
		t.Fatalf("failure of a job that left was kept: %v", js[0].LastMoved)
	}

	// The manager's hysteresis then keeps the job from being tried again
	// at once: 1.5 here vs 1 there with it is a gain, but its share of a
	// CPU would grow less than HysteresisGain times.
	s := mustPolicy(t, "balance")
	snap := Snapshot{Now: t0, Self: Node{ID: "1", Capacity: 1, Load: 1.5}, Peers: []Node{{ID: "2", Capacity: 1}},
		Jobs: []Job{{ID: "1.1", Started: t0.Add(-time.Minute), Runnable: 1}}}
	if moves := s.Decide(snap, rand.New(rand.NewSource(1))); len(moves) != 1 {
		t.Fatalf("control: without the failure, moves %v, want one", moves)
	}
	var f Ledger
	f.Failed("1.1", failedAt)
	f.ApplyFailures(snap.Jobs, []string{"1.1"})
	if moves := s.Decide(snap, rand.New(rand.NewSource(1))); len(moves) != 0 {
		t.Fatalf("a job whose move failed a second ago was tried again: %v", moves)
	}
}

func TestLedgerPacing(t *testing.T) {
	for _, tc := range []struct {
		name string
		wake time.Time
		want time.Time
	}{
		{"no job to wait for", time.Time{}, t0.Add(3 * time.Second)},
		{"a job old enough sooner", t0.Add(time.Second), t0.Add(time.Second)},
		{"a job old enough later", t0.Add(5 * time.Second), t0.Add(3 * time.Second)},
		{"a wake gone by", t0.Add(-time.Second), t0.Add(3 * time.Second)},
		{"a wake now", t0, t0.Add(3 * time.Second)},
	} {
		if got := new(Ledger).NextRound(t0, 3*time.Second, tc.wake); !got.Equal(tc.want) {
			t.Errorf("%s: NextRound = %v, want %v", tc.name, got.Sub(t0), tc.want.Sub(t0))
		}
	}
	cases := []struct {
		name    string
		running bool
		tr      Trigger
		passive bool
		due     bool
	}{
		{"period, active policy", false, ByPeriod, false, true},
		{"period, passive policy", false, ByPeriod, true, true},
		{"kick, passive policy", false, ByKick, true, true},
		{"kick, active policy", false, ByKick, false, false},
		{"period while moves run", true, ByPeriod, false, false},
		{"period while moves run, passive", true, ByPeriod, true, false},
		{"kick while moves run", true, ByKick, true, false},
	}
	for _, tc := range cases {
		var l Ledger
		if tc.running {
			l.Started([]Move{{Job: "1.1", To: "2", At: t0}})
		}
		if got := l.RoundDue(tc.tr, tc.passive); got != tc.due {
			t.Errorf("%s: due %v, want %v", tc.name, got, tc.due)
		}
	}

	// A round that decided nothing starts nothing.
	var l Ledger
	l.Started(nil)
	if !l.RoundDue(ByPeriod, false) {
		t.Fatal("a round without moves left the ledger running")
	}
	// A batch that moved a job is followed by a round at once; one that
	// moved none is not. Either way rounds run again.
	for _, moved := range []bool{true, false} {
		l.Started([]Move{{Job: "1.1", To: "2", At: t0}})
		if again := l.Finished(moved, t0, time.Time{}); again != moved {
			t.Errorf("Finished(moved %v) = %v", moved, again)
		}
		if !l.RoundDue(ByPeriod, false) || !l.RoundDue(ByKick, true) {
			t.Errorf("after Finished(moved %v) no round is due", moved)
		}
	}
	// A destination refused one of the batch's moves, and its answer
	// explains why (the load it gives leaves the move no gain): the answer
	// corrects the view (Declined), and a round follows at once to send
	// the job elsewhere; up to RefusedRetries times within RefusedWindow.
	// Not for a refusal the answer does not explain (a node that says it
	// is idle and refuses all the same would be asked again by every
	// round), and not for an answer heard with no batch running.
	mv := cpuMove("1.1", "1") // load 2 at node 1, threshold 0.25
	busy := Node{ID: "2", Capacity: 1, Load: 1, MemFreeMB: 100}
	idle := Node{ID: "2", Capacity: 1, Load: 0, MemFreeMB: 100}
	step := RefusedWindow / (2 * RefusedRetries)
	type refusal struct {
		name    string
		answer  Node
		at      time.Time
		running bool
		again   bool
	}
	var refusals []refusal
	for k := 0; k < RefusedRetries; k++ {
		refusals = append(refusals, refusal{fmt.Sprintf("refused, the answer busy, %d", k+1), busy, t0.Add(time.Duration(k) * step), true, true})
	}
	refusals = append(refusals,
		refusal{"refused once more within the window", busy, t0.Add(time.Duration(RefusedRetries) * step), true, false},
		refusal{"refused after the window", busy, t0.Add(RefusedWindow), true, true},
		refusal{"refused, the answer idle", idle, t0.Add(3 * RefusedWindow), true, false},
		refusal{"heard outside a batch", busy, t0.Add(5 * RefusedWindow), false, false})
	for _, tc := range refusals {
		mv.To, mv.At = tc.answer.ID, tc.at
		if tc.running {
			l.Started([]Move{mv})
			l.Declined(mv, tc.answer, tc.at)
		} else {
			l.Declined(mv, tc.answer, tc.at)
			l.Started([]Move{mv})
		}
		if again := l.Finished(false, tc.at, time.Time{}); again != tc.again {
			t.Errorf("%s: Finished(no move) = %v, want %v", tc.name, again, tc.again)
		}
	}
	// A job came of age while the moves ran (and failed): the round of
	// its wake was skipped, so one follows at once; not for a wake to come.
	for _, tc := range []struct {
		wake  time.Time
		again bool
	}{{t0.Add(-time.Second), true}, {t0, true}, {t0.Add(time.Second), false}} {
		l.Started([]Move{{Job: "1.1", To: "2", At: t0}})
		if again := l.Finished(false, t0, tc.wake); again != tc.again {
			t.Errorf("Finished(no move, wake %v from now) = %v, want %v", tc.wake.Sub(t0), again, tc.again)
		}
	}
}

// A load entry from a node that refused one of this node's moves is news
// for the scheduler when the node has room now and its load fell by half
// a thread or more below what its answer said: the vector's entry before
// it may have shown room all along (smoothed, it lags), and the round
// after the refusal then chose no other node. Not from a node never heard
// from, nor without room, nor for a smaller fall; and once per refusal.
func TestLedgerEasedAfterARefusal(t *testing.T) {
	var l Ledger
	for _, tc := range []struct {
		name       string
		node       string
		load, self float64
		eases      bool
	}{
		{"one job ended there", "2", 1, 3, true},
		{"idle now", "2", 0, 2, true},
		{"no room: busier than this node with one more", "2", 1, 2, false},
		{"a fall of under half a thread", "2", 1.6, 3, false},
		{"never heard from", "3", 0, 3, false},
	} {
		l.Heard(Node{ID: "2", Load: 2, MemFreeMB: 100}, t0) // capacity 1: two jobs, with the one it admitted
		if got := l.Eased(tc.node, tc.load, 1, tc.self); got != tc.eases {
			t.Errorf("%s: Eased = %v, want %v", tc.name, got, tc.eases)
		}
		if tc.eases && l.Eased(tc.node, tc.load, 1, tc.self) {
			t.Errorf("%s: Eased twice for one refusal", tc.name)
		}
	}
	l.Heard(Node{ID: "2", Load: 2, MemFreeMB: 100}, t0)
	if l.Eased("2", 0, 0, 3) {
		t.Error("a node of no capacity eases")
	}
}

// Node 1 moved a job to each of nodes 2 and 3; their load-vector entries
// are from before the moves (a node hears from a given peer only every
// few intervals), so Effective counts the moves in. Once node 1, the
// jobs' home, learns that the job on node 2 ended, that move no longer
// counts, and node 1's next job goes to node 2; node 3 still counts its.
func TestLedgerEndedJobNoLongerLoadsItsTarget(t *testing.T) {
	pol := mustPolicy(t, "balance")
	old := t0.Add(-5 * time.Second)
	var l Ledger
	l.Started([]Move{
		{Job: "1.1", From: "1", To: "2", At: t0.Add(-3 * time.Second), Kind: ProblemCPU, Runnable: 1},
		{Job: "1.2", From: "1", To: "3", At: t0.Add(-3 * time.Second), Kind: ProblemCPU, Runnable: 1},
	})
	l.Finished(true, t0.Add(-3*time.Second), time.Time{})
	round := func() []Move {
		snap := Snapshot{Now: t0, Self: Node{ID: "1", Capacity: 1, Load: 2, MemFreeMB: 1000},
			Peers:  []Node{{ID: "2", Capacity: 1, MemFreeMB: 1000, Received: old}, {ID: "3", Capacity: 1, MemFreeMB: 1000, Received: old}},
			Jobs:   []Job{{ID: "1.3", Started: t0.Add(-time.Minute), Runnable: 1, RSSMB: 10}, {ID: "1.4", Started: t0.Add(-time.Minute), Runnable: 1, RSSMB: 10}},
			Recent: l.Recent(t0)}
		return pol.Decide(snap, rand.New(rand.NewSource(1)))
	}
	if mv := round(); len(mv) != 0 {
		t.Fatalf("with both moves counted, nodes 2 and 3 are as loaded as node 1 with one more: moves %+v, want none", mv)
	}
	l.Ended("1.1")
	l.Ended("1.9") // a job it never moved: nothing
	mv := round()
	if len(mv) != 1 || mv[0].To != "2" {
		t.Fatalf("after job 1.1 ended: moves %+v, want one, to node 2", mv)
	}
	if r := l.Recent(t0); len(r) != 1 || r[0].Job != "1.2" {
		t.Fatalf("recent moves %+v, want job 1.2's alone", r)
	}
}

// Pending counts the admitted moves whose jobs have not arrived and whose
// deadlines have not passed, the asked job's own left out: what a refusal
// names beside the node's runnable threads.
func TestLedgerPending(t *testing.T) {
	var l Ledger
	self := Node{ID: "3", Capacity: 1, MemFreeMB: 1000}
	for _, job := range []string{"1.1", "1.2"} {
		mv := Move{Job: job, From: "1", To: "3", Kind: ProblemCPU, Runnable: 1, SrcLoad: 10, Threshold: 0.25}
		if ans := l.Admit(mv, self, t0); ans.Refused != nil {
			t.Fatalf("move of %s refused: %v", job, ans.Refused)
		}
	}
	if n := l.Pending(t0, ""); n != 2 {
		t.Fatalf("pending %d, want 2", n)
	}
	if n := l.Pending(t0, "1.2"); n != 1 {
		t.Fatalf("pending but job 1.2's own %d, want 1", n)
	}
	l.Arrived("1.1")
	if n := l.Pending(t0, ""); n != 1 {
		t.Fatalf("after 1.1 arrived: pending %d, want 1", n)
	}
	if n := l.Pending(t0.Add(AdmitHold+time.Nanosecond), ""); n != 0 {
		t.Fatalf("past the deadline: pending %d, want 0", n)
	}
}

// A move its source gave up before sending anything ends its admission at
// once (Withdrawn), and only that admission: another source's admission
// of the job, or the same source's for a later decision, stays, and the
// node's reserved load drops by the job alone.
func TestLedgerWithdrawn(t *testing.T) {
	var l Ledger
	self := Node{ID: "3", Capacity: 1, MemFreeMB: 1000}
	a := Move{Job: "1.1", From: "1", To: "3", At: t0, Kind: ProblemCPU, Runnable: 1, SrcLoad: 10, Threshold: 0.25}
	b := Move{Job: "2.1", From: "2", To: "3", At: t0, Kind: ProblemCPU, Runnable: 1, SrcLoad: 10, Threshold: 0.25}
	for _, mv := range []Move{a, b} {
		if ans := l.Admit(mv, self, t0); ans.Refused != nil {
			t.Fatalf("move of %s refused: %v", mv.Job, ans.Refused)
		}
	}
	other := a
	other.From = "2"
	later := a
	later.At = t0.Add(time.Second)
	for _, mv := range []Move{other, later, {Job: "1.9", From: "1", At: t0}} {
		if l.Withdrawn(mv) {
			t.Fatalf("withdrawal %+v ended an admission it did not make", mv)
		}
	}
	if n := l.Pending(t0, ""); n != 2 {
		t.Fatalf("pending %d after withdrawals that match nothing, want 2", n)
	}
	if !l.Withdrawn(a) {
		t.Fatal("the source's own withdrawal ended nothing")
	}
	if n, got := l.Pending(t0, ""), l.Reserved(self, t0).Load; n != 1 || got != 1 {
		t.Fatalf("after the withdrawal: pending %d, reserved load %v; want 1 and 1 (job 2.1 alone)", n, got)
	}
	if l.Withdrawn(a) {
		t.Fatal("a second withdrawal ended something")
	}
	// The job is asked again in a later round: a withdrawal of the old
	// decision that arrives late leaves the new admission.
	if ans := l.Admit(later, self, t0.Add(time.Second)); ans.Refused != nil {
		t.Fatalf("asked again: %v", ans.Refused)
	}
	if l.Withdrawn(a) || l.Pending(t0.Add(time.Second), "") != 2 {
		t.Fatal("a late withdrawal of the earlier decision ended the later admission")
	}
}

// A move needs room for its job's memory request at its target, whatever
// its kind: the policy does not pick a peer without it, and the
// destination's ledger counts the requests of the moves it admitted, so
// a second move that would not fit with the first is refused.
func TestMovesNeedRoomForTheirMemoryRequest(t *testing.T) {
	s := mustPolicy(t, "balance")
	js := jobs(2, 10*time.Second)
	for i := range js {
		js[i].MemReqMB = 100
	}
	snap := Snapshot{Now: t0, Self: Node{ID: "1", Capacity: 1, Load: 2, MemJobsMB: 256, MemHeldMB: 200}, Jobs: js,
		Peers: []Node{{ID: "2", Capacity: 1, MemJobsMB: 256, MemHeldMB: 200}, {ID: "3", Capacity: 1, Load: 0.5, MemJobsMB: 256, MemHeldMB: 100}}}
	moves := s.Decide(snap, rand.New(rand.NewSource(1)))
	if len(moves) != 1 || moves[0].To != "3" || moves[0].MemReqMB != 100 {
		t.Fatalf("moves %+v: want one, to node 3, the idle node 2 having no room for 100 MiB", moves)
	}
	var l Ledger
	dest := Node{ID: "3", Capacity: 1, MemFreeMB: 1000, MemJobsMB: 256, MemHeldMB: 100}
	mv := cpuMove("1.1", "1")
	mv.MemReqMB, mv.SrcLoad = 100, 10
	if a := l.Admit(mv, dest, t0); a.Refused != nil || a.MemHeldMB != 200 {
		t.Fatalf("first: %+v", a)
	}
	mv2 := cpuMove("1.2", "1")
	mv2.MemReqMB, mv2.SrcLoad = 100, 10
	a := l.Admit(mv2, dest, t0)
	if a.Refused == nil || !errors.Is(a.Refused, ErrNoRoom) || a.MemHeldMB != 200 {
		t.Fatalf("second: %+v", a)
	}
	if got := l.AdmittedMemMB(t0, ""); got != 100 {
		t.Fatalf("admitted %v MiB, want 100", got)
	}
	if got := l.AdmittedMemMB(t0.Add(AdmitHold+time.Second), ""); got != 0 {
		t.Fatalf("after the deadline %v MiB", got)
	}
}

// While a home's queue waits for room, a CPU move of a job with a memory
// request into room just freed is not made: the queue fills that room
// (and the room the move would leave) at once, and the move would gain
// nothing for its freeze. Without a queue waiting, the same move is made;
// a job without a request, or memory ushering, moves as before.
func TestNoMoveIntoRoomTheQueueFills(t *testing.T) {
	s := mustPolicy(t, "balance")
	js := jobs(2, 10*time.Second)
	for i := range js {
		js[i].MemReqMB = 100
	}
	snap := func(selfWaits, peerWaits bool, req float64) Snapshot {
		j := slices.Clone(js)
		for i := range j {
			j[i].MemReqMB = req
		}
		return Snapshot{Now: t0, Self: Node{ID: "1", Capacity: 1, Load: 2, MemJobsMB: 256, MemHeldMB: 200, Waiting: selfWaits}, Jobs: j,
			Peers: []Node{{ID: "2", Capacity: 1, MemJobsMB: 256, MemHeldMB: 200, Waiting: peerWaits}, {ID: "3", Capacity: 1, Load: 0.5, MemJobsMB: 256, MemHeldMB: 100}}}
	}
	for _, c := range []struct {
		name            string
		selfWaits, peer bool
		req             float64
		want            int
	}{
		{"no queue waits", false, false, 100, 1},
		{"this node's queue waits", true, false, 100, 0},
		{"a peer's queue waits", false, true, 100, 0},
		{"a job without a request", true, true, 0, 1},
	} {
		moves := s.Decide(snap(c.selfWaits, c.peer, c.req), rand.New(rand.NewSource(1)))
		if len(moves) != c.want {
			t.Errorf("%s: moves %+v, want %d", c.name, moves, c.want)
		}
	}
	// Short of memory (a job without a request grows), ushering moves
	// the largest job that fits, one with a request, queue or not.
	ush := mustPolicy(t, "ushering")
	sn := snap(true, true, 100)
	sn.Self.MemFreeMB, sn.Peers[1].MemFreeMB = 10, 2000
	sn.Jobs[0].RSSMB, sn.Jobs[1].RSSMB, sn.Jobs[1].MemReqMB = 95, 50, 0
	if moves := ush.Decide(sn, rand.New(rand.NewSource(1))); len(moves) != 1 || moves[0].Job != sn.Jobs[0].ID {
		t.Errorf("memory ushering moved %+v while a queue waits; want %s, the largest", moves, sn.Jobs[0].ID)
	}
}
