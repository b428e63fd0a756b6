package decisions

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"roam/internal/sched"
)

// Off by default; on, one line a round until the bound, then none, and
// each line reads back as the round.
func TestRecorderIsBounded(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	if New(dir, 0, log) != nil {
		t.Fatal("a recorder with record_decisions_bytes 0")
	}
	New(dir, 0, log).Add(sched.Recorded{}) // a nil recorder records nothing
	rd := sched.Recorded{Node: "1", Policy: "name: x\n", Draws: []uint64{1, 2}, Moves: []sched.Move{{Job: "j", To: "2"}}}
	line, _ := json.Marshal(rd)
	r := New(dir, int64(3*(len(line)+1)+10), log)
	for range 5 {
		r.Add(rd)
	}
	b, err := os.ReadFile(filepath.Join(dir, File))
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	if len(lines) != 3 {
		t.Fatalf("%d lines within a bound of 3 and a bit, want 3", len(lines))
	}
	var back sched.Recorded
	if err := json.Unmarshal(lines[2], &back); err != nil || back.Node != "1" || len(back.Draws) != 2 || back.Moves[0].To != "2" {
		t.Fatalf("read back %+v: %v", back, err)
	}
}
