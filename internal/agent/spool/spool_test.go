package spool

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func read(t *testing.T, s *Spools, id, stream string) string {
	t.Helper()
	b, err := s.Read(id, stream, 0, 1<<20)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return string(b)
}

// Output is appended at its offset: a resent piece adds only what is past
// the end, a piece past the end adds nothing (its sender sends again from
// the size it gets back), and a negative offset asks for the size.
func TestAppendAtOffsets(t *testing.T) {
	s := New(t.TempDir(), 1)
	if err := s.Make("n1.1"); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		p           Piece
		out, errb   int64
		stdout, err string
	}{
		{Piece{OutOff: 0, Out: []byte("ab")}, 2, 0, "ab", ""},
		{Piece{OutOff: 1, Out: []byte("bcd"), ErrOff: 0, Err: []byte("e")}, 4, 1, "abcd", "e"},
		{Piece{OutOff: 0, Out: []byte("ab"), ErrOff: 1}, 4, 1, "abcd", "e"}, // resent
		{Piece{OutOff: 9, Out: []byte("zz"), ErrOff: 1}, 4, 1, "abcd", "e"}, // a gap
		{Piece{OutOff: -1, ErrOff: -1}, 4, 1, "abcd", "e"},                  // sizes
	} {
		out, errb, ok := s.Append("n1.1", 0, tc.p)
		if !ok || out != tc.out || errb != tc.errb {
			t.Fatalf("%+v: sizes %d %d %v, want %d %d", tc.p, out, errb, ok, tc.out, tc.errb)
		}
		if got := read(t, s, "n1.1", "stdout"); got != tc.stdout {
			t.Fatalf("%+v: stdout %q, want %q", tc.p, got, tc.stdout)
		}
		if got := read(t, s, "n1.1", "stderr"); got != tc.err {
			t.Fatalf("%+v: stderr %q, want %q", tc.p, got, tc.err)
		}
	}
	if n := Size(s.Dir("n1.1")); n != 5 {
		t.Fatalf("size %d, want 5", n)
	}
}

// A restart cuts the spool back to its checkpoint's offsets; from then on
// output of the older copy is refused and the new copy's goes on from
// there. Remove takes the spool and what it knew away.
func TestCutFencesTheOlderCopy(t *testing.T) {
	s := New(t.TempDir(), 1)
	_ = s.Make("n1.2")
	s.Append("n1.2", 0, Piece{OutOff: 0, Out: []byte("hello world")})
	if err := s.Cut("n1.2", 1, 5, 0); err != nil {
		t.Fatal(err)
	}
	if out, _, ok := s.Append("n1.2", 0, Piece{OutOff: 5, Out: []byte(" late")}); ok || out != 0 {
		t.Fatalf("the old copy's output was taken: %d %v", out, ok)
	}
	if out, _, ok := s.Append("n1.2", 1, Piece{OutOff: 5, Out: []byte("!")}); !ok || out != 6 {
		t.Fatalf("the new copy's: %d %v", out, ok)
	}
	if got := read(t, s, "n1.2", "stdout"); got != "hello!" {
		t.Fatalf("stdout %q", got)
	}
	if err := s.Sync("n1.2"); err != nil {
		t.Fatal(err)
	}
	s.Remove("n1.2")
	if _, err := os.Stat(s.Dir("n1.2")); !os.IsNotExist(err) {
		t.Fatalf("spool still there: %v", err)
	}
	if err := s.Sync("n1.2"); err != nil {
		t.Fatalf("sync of a removed spool: %v", err)
	}
	if filepath.Dir(s.Dir("n1.2")) != s.root {
		t.Fatal("a spool outside the root")
	}
}

// Sync makes a job's output durable whole: its files, and the directory
// entries that name them and its directory.
func TestSyncSyncsTheDirectories(t *testing.T) {
	root := t.TempDir()
	s := New(root, 1)
	if err := s.Make("1.1"); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := s.Append("1.1", 0, Piece{Out: []byte("out\n")}); !ok {
		t.Fatal("append refused")
	}
	var synced []string
	old := syncFile
	syncFile = func(f *os.File) error { synced = append(synced, f.Name()); return old(f) }
	t.Cleanup(func() { syncFile = old })
	if err := s.Sync("1.1"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{filepath.Join(s.Dir("1.1"), "stdout"), s.Dir("1.1"), root} {
		if !slices.Contains(synced, want) {
			t.Errorf("Sync synced %v; not %s", synced, want)
		}
	}
}
