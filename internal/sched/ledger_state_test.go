package sched

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
)

// A ledger's state, recorded as JSON and restored, completes a round's
// snapshot as the ledger itself does, and the policy decides the same
// moves on it: what a recorded decision's replay needs of the ledger.
func TestLedgerStateReplays(t *testing.T) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var l Ledger
	mv := Move{Job: "9.1", To: "1", From: "9", Kind: ProblemCPU, SrcLoad: 4, Runnable: 1, At: at}
	if a := l.Admit(mv, Node{ID: "1", Capacity: 1}, at); a.Refused != nil {
		t.Fatal(a.Refused)
	}
	l.Started([]Move{{Job: "1.1", To: "2", From: "1", Runnable: 1, At: at}, {Job: "1.2", To: "3", From: "1", Runnable: 1, At: at}})
	l.Declined(Move{Job: "1.2", To: "3", Kind: ProblemCPU, SrcLoad: 3, Runnable: 1}, Node{ID: "3", Capacity: 1, Load: 2.5}, at.Add(time.Second))
	l.Failed("1.3", at.Add(2*time.Second))
	l.Heard(Node{ID: "4", Capacity: 1, Load: 0.5}, at.Add(3*time.Second))

	b, err := json.Marshal(l.State())
	if err != nil {
		t.Fatal(err)
	}
	var st LedgerState
	if err := json.Unmarshal(b, &st); err != nil {
		t.Fatal(err)
	}
	r := LedgerFrom(st)
	if !reflect.DeepEqual(r.State(), l.State()) {
		t.Fatalf("restored state differs:\n%+v\n%+v", r.State(), l.State())
	}

	now := at.Add(4 * time.Second)
	base := Snapshot{Now: now, Self: Node{ID: "1", Capacity: 1, Load: 4, MemFreeMB: 1000},
		Peers: []Node{{ID: "2", Capacity: 1, Load: 1, MemFreeMB: 1000, Received: at}, {ID: "3", Capacity: 1, Load: 0, MemFreeMB: 1000, Received: at},
			{ID: "4", Capacity: 1, Load: 3, MemFreeMB: 1000, Received: at}}}
	var probed []Probed
	var here []string
	for _, id := range []string{"1.1", "1.3", "1.4", "1.5"} {
		probed = append(probed, Probed{Job: Job{ID: id, Started: at.Add(-time.Minute), RSSMB: 10, Runnable: 1}, Runnable: 1})
		here = append(here, id)
	}
	snaps := [2]Snapshot{}
	for i, led := range []*Ledger{&l, &r} {
		s := base
		s.Peers = append([]Node(nil), base.Peers...)
		led.Complete(&s, probed, here, nil)
		snaps[i] = s
	}
	if !reflect.DeepEqual(snaps[0], snaps[1]) {
		t.Fatalf("snapshots differ:\n%+v\n%+v", snaps[0], snaps[1])
	}
	if snaps[0].Peers[2].Load != 0.5 || len(snaps[0].Recent) != 2 || snaps[0].Jobs[1].LastMoved.IsZero() {
		t.Fatalf("the ledger's heard load, recent moves and failure did not reach the snapshot: %+v", snaps[0])
	}
	pol := mustPolicy(t, "mosix")
	a, b2 := pol.Decide(snaps[0], nil), pol.Decide(snaps[1], nil)
	if len(a) == 0 || !reflect.DeepEqual(a, b2) {
		t.Fatalf("decisions differ or are none:\n%+v\n%+v", a, b2)
	}
}
