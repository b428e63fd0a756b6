package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"roam/internal/agent/decisions"
	"roam/internal/emu"
	"roam/internal/sched"
	"roam/internal/sim"
)

// The scheduling rounds of real agents, recorded (record_decisions_bytes),
// replay through the simulator's own snapshot builder and decide the same
// moves (sim.Replay): a burst of eight jobs on the 0.2-CPU node of four
// under the default policy, whose rounds move some of them. With
// ROAM_UPDATE_DOCS=1 a few of the rounds become internal/sim's testdata,
// which its TestReplayedDecisions replays in make test. A make test-long
// check: the replay of the committed rounds is make test's.
func TestRecordedDecisionsReplay(t *testing.T) {
	long(t)
	burn := workload(t, "burn")
	conf := filepath.Join(e2eRoot, "record-decisions.yaml")
	if err := os.WriteFile(conf, []byte("record_decisions_bytes: 8388608\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := upCluster(t, "e2erec", 99, "--nodes", "4", "--cpu", "0.8,0.4,0.4,0.2", "--agent-config", conf)
	c.waitAllAlive(4)
	c.waitLoadKnown("4", 4)
	if out, err := c.roamAs(jobUser, "--node", "4", "run", "-n", "8", "--on", "4", burn, "2", "0").CombinedOutput(); err != nil {
		t.Fatalf("roam run: %v: %s", err, out)
	}
	st, err := emu.Load(c.name)
	if err != nil {
		t.Fatal(err)
	}
	var rounds []sched.Recorded
	for _, n := range st.Nodes {
		rounds = append(rounds, readRounds(t, filepath.Join(n.Dir, decisions.File))...)
	}
	moved, nodes := 0, map[string]bool{}
	for i, r := range rounds {
		if err := sim.Replay(r); err != nil {
			t.Errorf("round %d (node %s at %s): %v", i, r.Node, r.Now.Format(time.StampMilli), err)
		}
		if len(r.Moves) > 0 {
			moved++
		}
		nodes[r.Node] = true
	}
	if moved == 0 || len(nodes) < 2 {
		t.Fatalf("%d rounds recorded on %d nodes, %d with moves: the burst was not balanced, or not recorded", len(rounds), len(nodes), moved)
	}
	t.Logf("%d rounds recorded on %d nodes, %d with moves, each replayed to the same snapshot and moves", len(rounds), len(nodes), moved)
	if os.Getenv("ROAM_UPDATE_DOCS") != "" {
		writeRounds(t, filepath.Join("..", "..", "internal", "sim", "testdata", "decisions.jsonl"), rounds)
	}
}

func readRounds(t *testing.T, path string) []sched.Recorded {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the record: %v", err)
	}
	// The agents still run: a line being written is left out.
	b = b[:bytes.LastIndexByte(b, '\n')+1]
	var out []sched.Recorded
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var r sched.Recorded
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, r)
	}
	return out
}

// writeRounds keeps a small sample of rounds as testdata: every round
// that moved a job, and as many others that had jobs to judge, in the
// order recorded.
func writeRounds(t *testing.T, path string, rounds []sched.Recorded) {
	t.Helper()
	moved := 0
	for _, r := range rounds {
		if len(r.Moves) > 0 {
			moved++
		}
	}
	var b bytes.Buffer
	others := 0
	for _, r := range rounds {
		if len(r.Moves) == 0 && (len(r.Probed) == 0 || others >= max(moved, 16)) {
			continue
		}
		if len(r.Moves) == 0 {
			others++
		}
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
