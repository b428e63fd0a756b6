package outfiles

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"roam/internal/agent/spool"
	"roam/internal/asuser"
	"roam/internal/lockorder"
)

// The writer copies what a job's spool holds into its files, as the
// user: again from the start for a new incarnation (a restart from a
// checkpoint, whose spool was cut back), cut to the output's size at the
// end; a file it cannot write is given up, once, with why.
func TestWriterCopiesCutsAndGivesUp(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("needs root: it writes as another user")
	}
	sp := spool.New(t.TempDir(), lockorder.Rank(1))
	dir, err := os.MkdirTemp("", "roam-outfiles-")
	if err != nil || os.Chown(dir, 1001, 1001) != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	failed := map[string]string{}
	w := New(Config{Spools: sp, Log: slog.New(slog.DiscardHandler), Failed: func(id, why string) { failed[id] = why }})
	user := asuser.Cred{UID: 1001, GID: 1001}
	out := filepath.Join(dir, "out")
	appendOut := func(inc int, off int64, text string) int64 {
		n, _, ok := sp.Append("n1.1", inc, spool.Piece{OutOff: off, Out: []byte(text)})
		if !ok {
			t.Fatalf("append at %d of inc %d refused", off, inc)
		}
		return n
	}
	run := func() {
		for w.Round() {
		}
	}
	if err := sp.Make("n1.1"); err != nil {
		t.Fatal(err)
	}
	n := appendOut(0, 0, "first line\nsecond line\n")
	w.Note("n1.1", Files{Cred: user, Out: out}, 0, n, 0, false)
	run()
	if b, _ := os.ReadFile(out); string(b) != "first line\nsecond line\n" {
		t.Fatalf("after the first note: %q", b)
	}
	// A restart from a checkpoint taken after "first line": the spool
	// is cut back there, and the new copy's output follows.
	if err := sp.Cut("n1.1", 1, int64(len("first line\n")), 0); err != nil {
		t.Fatal(err)
	}
	n = appendOut(1, int64(len("first line\n")), "again\n")
	w.Note("n1.1", Files{Cred: user, Out: out}, 1, n, 0, true)
	run()
	if b, _ := os.ReadFile(out); string(b) != "first line\nagain\n" {
		t.Fatalf("after the restart and the end: %q", b)
	}
	if w.Pending() != 0 {
		t.Fatalf("%d jobs left after the end", w.Pending())
	}
	// A path the user may not write: given up, with why.
	w.Note("n1.1", Files{Cred: user, Out: "/root/roam-outfiles-test"}, 2, n, 0, true)
	run()
	if _, err := os.Stat("/root/roam-outfiles-test"); err == nil || !strings.Contains(failed["n1.1"], "permission denied") || w.Pending() != 0 {
		t.Fatalf("root's directory: %q, pending %d", failed["n1.1"], w.Pending())
	}
}
