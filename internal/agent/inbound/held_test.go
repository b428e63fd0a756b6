package inbound

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"roam/internal/migrate"
)

// keptOf is a check's kept descriptors: n files open on /dev/null, keyed
// by their number.
func keptOf(t *testing.T, from, n int) *kept {
	t.Helper()
	k := newKept()
	for i := range n {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		k.files[migrate.ExtKey(1, uint64(from+i))] = f
	}
	return k
}

// open says whether f is still an open descriptor.
func open(f *os.File) bool {
	_, err := f.Stat()
	return err == nil
}

// The descriptors the checks keep are bounded all together (MaxHeld): a
// check past the bound is refused and its descriptors closed; a late
// check adds to its first; a restore takes a check's; a migration that
// ends without a restore, or an abort, closes them.
func TestHeldBound(t *testing.T) {
	var h holds
	a := keptOf(t, 0, 3)
	if err := h.keep("m1", "j1", a); err != nil {
		t.Fatal(err)
	}
	if err := h.keep("m1", "j1", keptOf(t, 10, 1)); err == nil {
		t.Fatal("a second check of one migration was kept")
	}
	big := keptOf(t, 100, MaxHeld-2)
	some := big.files[migrate.ExtKey(1, 100)]
	if err := h.keep("m2", "j2", big); err == nil || !strings.Contains(err.Error(), "8192 descriptors") {
		t.Fatalf("past the bound: %v", err)
	}
	if open(some) {
		t.Fatal("a refused check's descriptors stay open")
	}
	if h.count() != 3 {
		t.Fatalf("%d kept", h.count())
	}
	// A late check: its new files join, a key held already keeps the
	// first descriptor.
	late := keptOf(t, 2, 2) // keys 2 (held) and 3
	dup := late.files[migrate.ExtKey(1, 2)]
	if err := h.add("m1", "j1", late); err != nil {
		t.Fatal(err)
	}
	if open(dup) || h.count() != 4 {
		t.Fatalf("late check: %d kept, duplicate open %v", h.count(), open(dup))
	}
	if err := h.add("m9", "j1", keptOf(t, 0, 1)); err == nil {
		t.Fatal("a late check with no first one was kept")
	}
	if err := h.add("m1", "other", keptOf(t, 0, 1)); err == nil {
		t.Fatal("a late check of another job was kept")
	}
	if h.take("m1", "other") != nil {
		t.Fatal("another job's check taken")
	}
	if h.count() != 0 {
		t.Fatalf("after a take by another job: %d kept", h.count())
	}
	if k := h.take("m1", "j1"); k != nil {
		t.Fatal("the check taken twice")
	}
	// Kept, then taken by its restore, which closes them after.
	b := keptOf(t, 0, 2)
	if err := h.keep("m3", "j3", b); err != nil {
		t.Fatal(err)
	}
	got := h.take("m3", "j3")
	if got != b || h.count() != 0 {
		t.Fatalf("take: %v, %d kept", got, h.count())
	}
	got.close()
	// Dropped (the migration ended, or an abort).
	c := keptOf(t, 0, 1)
	one := c.files[migrate.ExtKey(1, 0)]
	if err := h.keep("m4", "j4", c); err != nil {
		t.Fatal(err)
	}
	h.drop("m4")
	if open(one) || h.count() != 0 {
		t.Fatal("dropped, still open")
	}
	h.drop("m4")
}

// A deleted file's content, carried in the images, goes into the file
// made for it, with its mode; a content of another size is refused.
func TestKeptFill(t *testing.T) {
	dir := t.TempDir()
	key := migrate.ExtKey(0x1b, 40)
	if err := os.WriteFile(filepath.Join(dir, migrate.GhostImage(key)), []byte("ghostdata"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "made"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("older, longer content"); err != nil {
		t.Fatal(err)
	}
	k := newKept()
	k.files[key] = f
	k.ghosts[key] = migrate.OpenFile{Path: "/u/t", Key: key, Deleted: true, Access: "rw", Mode: 0o640, Size: 9}
	if err := k.fill(dir); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "made"))
	fi, _ := os.Stat(filepath.Join(dir, "made"))
	if err != nil || string(b) != "ghostdata" || fi.Mode().Perm() != 0o640 {
		t.Fatalf("filled: %q %v, mode %v", b, err, fi.Mode())
	}
	k.ghosts[key] = migrate.OpenFile{Path: "/u/t", Key: key, Deleted: true, Access: "rw", Mode: 0o640, Size: 10}
	if err := k.fill(dir); err == nil || !strings.Contains(err.Error(), "9 bytes in the images, not 10") {
		t.Fatalf("another size: %v", err)
	}
	k.close()
}
