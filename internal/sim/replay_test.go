package sim

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"roam/internal/sched"
)

// Rounds recorded from real agents (test/e2e's TestRecordedDecisionsReplay
// wrote testdata/decisions.jsonl: a burst on a 4-node emulated cluster,
// record_decisions_bytes on) replay through the simulator's own snapshot
// builder to the agent's snapshot, and the policy decides the agent's
// moves on it with the round's draws.
func TestReplayedDecisions(t *testing.T) {
	rounds := recordedRounds(t)
	moved, peers, nodes := 0, 0, map[string]bool{}
	for i, r := range rounds {
		if err := Replay(r); err != nil {
			t.Errorf("round %d (node %s): %v", i, r.Node, err)
		}
		if len(r.Moves) > 0 {
			moved++
		}
		peers = max(peers, len(r.Snapshot.Peers))
		nodes[r.Node] = true
	}
	// What the file must hold for the replay to check anything.
	if len(rounds) < 5 || moved == 0 || peers < 2 || len(nodes) < 2 {
		t.Fatalf("%d rounds on %d nodes, %d with moves, at most %d peers: too little to replay", len(rounds), len(nodes), moved, peers)
	}
	t.Logf("%d rounds on %d nodes, %d with moves, replayed", len(rounds), len(nodes), moved)
}

// Replay finds a round whose inputs do not give what the agent recorded:
// a load vector's entry changed (the snapshot differs), a move's target
// changed (the decision differs), a draw missing.
func TestReplayFindsADifference(t *testing.T) {
	var r sched.Recorded
	for _, x := range recordedRounds(t) {
		if len(x.Moves) > 0 && len(x.Vector) > 0 {
			r = x
			break
		}
	}
	if r.Moves == nil {
		t.Fatal("no recorded round moved a job")
	}
	vec := r.Vector
	r.Vector = append(vec[:0:0], vec...)
	for i := range r.Vector {
		if r.Members[r.Vector[i].Node].Alive && r.Vector[i].Node != r.Self.ID {
			r.Vector[i].Load += 1
			break
		}
	}
	if Replay(r) == nil {
		t.Error("a changed load vector entry replayed to the agent's snapshot")
	}
	r.Vector = vec
	moves := r.Moves
	r.Moves = append(moves[:0:0], moves...)
	r.Moves[0].To += "x"
	if Replay(r) == nil {
		t.Error("a changed move replayed as the agent's")
	}
	r.Moves = moves
	draws := r.Draws
	r.Draws = append(draws[:0:0], draws...)
	if len(r.Draws) > 0 {
		r.Draws = r.Draws[1:]
		if Replay(r) == nil {
			t.Error("a round replayed with a draw missing")
		}
	}
	r.Draws = draws
	if err := Replay(r); err != nil {
		t.Fatalf("the round as recorded: %v", err)
	}
}

func recordedRounds(t *testing.T) []sched.Recorded {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "decisions.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []sched.Recorded
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var r sched.Recorded
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	return out
}
