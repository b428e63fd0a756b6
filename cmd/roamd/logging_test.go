package main

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
)

// Under the journal each line starts with its syslog priority; with
// --log-json each line (after it) is one JSON record; a logger's
// attributes carry over.
func TestJournalPriorities(t *testing.T) {
	var b bytes.Buffer
	l := newLogger(&b, slog.LevelDebug, false, true).With("node", "n1")
	l.Debug("d")
	l.Info("i")
	l.Warn("w")
	l.Error("e")
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%q", lines)
	}
	for i, p := range []string{"<7>", "<6>", "<4>", "<3>"} {
		if !strings.HasPrefix(lines[i], p) || !strings.Contains(lines[i], "node=n1") {
			t.Errorf("line %d: %q, want prefix %s and the node", i, lines[i], p)
		}
	}
	b.Reset()
	newLogger(&b, slog.LevelInfo, true, true).Warn("w", "k", 1)
	line, ok := strings.CutPrefix(strings.TrimSpace(b.String()), "<4>")
	var rec map[string]any
	if !ok || json.Unmarshal([]byte(line), &rec) != nil || rec["msg"] != "w" || rec["k"] != 1.0 {
		t.Fatalf("JSON under the journal: %q", b.String())
	}
	b.Reset()
	newLogger(&b, slog.LevelInfo, false, false).Debug("not shown")
	newLogger(&b, slog.LevelInfo, false, false).Info("plain")
	if s := b.String(); strings.HasPrefix(s, "<") || !strings.Contains(s, "msg=plain") || strings.Contains(s, "not shown") {
		t.Fatalf("outside the journal: %q", s)
	}
}
