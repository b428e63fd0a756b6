package rootdir

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEnsure(t *testing.T) {
	if os.Getuid() != 0 {
		t.Fatal("needs root: the checks are about root's ownership")
	}
	base := t.TempDir() // root's, 0700: a safe ancestor
	victim := filepath.Join(base, "victim")
	if err := os.WriteFile(victim, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	sticky := filepath.Join(base, "shm")
	if err := os.Mkdir(sticky, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sticky, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}

	// Made where missing, 0700, below a sticky world-writable ancestor.
	good := filepath.Join(sticky, "roam", "c1", "n1")
	if err := Ensure(good, 0o700); err != nil {
		t.Fatalf("Ensure(%s): %v", good, err)
	}
	if fi, err := os.Stat(good); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("%s: %v %v", good, fi.Mode(), err)
	}
	// Its missing ancestors are made 0755: users pass through /run/roam
	// to the socket in it, whoever made it first.
	for _, d := range []string{filepath.Dir(good), filepath.Dir(filepath.Dir(good))} {
		if fi, err := os.Stat(d); err != nil || fi.Mode().Perm() != 0o755 {
			t.Fatalf("ancestor %s: %v %v, want 0755", d, fi.Mode(), err)
		}
	}
	if err := Ensure(good, 0o700); err != nil {
		t.Fatalf("again: %v", err)
	}

	for _, c := range []struct {
		name string
		make func(t *testing.T) string // returns the path to Ensure
		bad  string                    // the component the error must name
	}{
		{"made first by a user", func(t *testing.T) string {
			d := filepath.Join(sticky, "u1")
			if err := os.Mkdir(d, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chown(d, 1001, 1001); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(d, "n1")
		}, filepath.Join(sticky, "u1")},
		{"a symlink to elsewhere", func(t *testing.T) string {
			l := filepath.Join(sticky, "u2")
			if err := os.Symlink(base, l); err != nil {
				t.Fatal(err)
			}
			return filepath.Join(l, "n1")
		}, filepath.Join(sticky, "u2")},
		{"world-writable, not sticky", func(t *testing.T) string {
			d := filepath.Join(base, "open")
			if err := os.Mkdir(d, 0o777); err != nil {
				t.Fatal(err)
			}
			_ = os.Chmod(d, 0o777)
			return filepath.Join(d, "n1")
		}, filepath.Join(base, "open")},
		{"itself group-writable", func(t *testing.T) string {
			d := filepath.Join(base, "grp")
			if err := os.Mkdir(d, 0o770); err != nil {
				t.Fatal(err)
			}
			_ = os.Chmod(d, 0o770)
			return d
		}, filepath.Join(base, "grp")},
		{"relative", func(t *testing.T) string { return "roam/images" }, "roam/images"},
	} {
		p := c.make(t)
		err := Ensure(p, 0o755)
		if err == nil || !strings.HasPrefix(err.Error(), c.bad+":") {
			t.Errorf("%s: Ensure(%s) = %v, want an error naming %s", c.name, p, err, c.bad)
		}
	}
	if b, err := os.ReadFile(victim); err != nil || string(b) != "keep" {
		t.Fatalf("the victim changed: %q %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(base, "n1")); err == nil {
		t.Fatal("Ensure made a directory through the symlink")
	}
}

// Check names a bad component that exists and accepts a missing tail.
func TestCheck(t *testing.T) {
	base := t.TempDir()
	if err := Check(filepath.Join(base, "missing", "deeper")); err != nil {
		t.Fatalf("missing tail: %v", err)
	}
	l := filepath.Join(base, "link")
	if err := os.Symlink("/etc", l); err != nil {
		t.Fatal(err)
	}
	if err := Check(filepath.Join(l, "t")); err == nil || !strings.HasPrefix(err.Error(), l+":") {
		t.Fatalf("through a symlink: %v", err)
	}
}
