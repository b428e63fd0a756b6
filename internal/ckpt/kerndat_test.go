package ckpt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shmDir is a directory on a tmpfs, removed after the test.
func shmDir(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the directories must be root's")
	}
	d, err := os.MkdirTemp("/dev/shm", "roam-kdat-")
	if err != nil {
		t.Skip("no /dev/shm:", err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	return d
}

func TestEnsureKerndatMakesTheDirectoryRootsAlone(t *testing.T) {
	shm := shmDir(t)

	// A new one: made 0700.
	dir := filepath.Join(shm, "run", "criu")
	if err := EnsureKerndat(dir); err != nil {
		t.Fatalf("EnsureKerndat(%s): %v", dir, err)
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("made %v (%v), want a 0700 directory", fi.Mode(), err)
	}

	// An existing root one others may read: tightened, and the temporary
	// file a failed CRIU left, which would stop every later cache, gone.
	open := filepath.Join(shm, "open")
	os.Mkdir(open, 0o755)
	os.Chmod(open, 0o755)
	os.WriteFile(filepath.Join(open, "criu.kdat.tmp"), nil, 0o600)
	os.WriteFile(filepath.Join(open, "criu.kdat"), []byte("facts"), 0o600)
	if err := EnsureKerndat(open); err != nil {
		t.Fatalf("EnsureKerndat(%s): %v", open, err)
	}
	if fi, _ := os.Lstat(open); fi.Mode().Perm() != 0o700 {
		t.Fatalf("%s left %v, want 0700", open, fi.Mode().Perm())
	}
	if _, err := os.Lstat(filepath.Join(open, "criu.kdat.tmp")); !os.IsNotExist(err) {
		t.Fatalf("criu.kdat.tmp left behind (%v)", err)
	}
	if _, err := os.Lstat(filepath.Join(open, "criu.kdat")); err != nil {
		t.Fatalf("the cache itself was removed: %v", err)
	}

	// Refused, the component named, nothing removed: a directory a user
	// owns, one below a user's directory, one others may write, a symlink.
	userDir := filepath.Join(shm, "user")
	os.Mkdir(userDir, 0o700)
	os.Chown(userDir, 1000, 1000)
	os.WriteFile(filepath.Join(userDir, "criu.kdat.tmp"), nil, 0o600)
	writable := filepath.Join(shm, "writable")
	os.Mkdir(writable, 0o777)
	os.Chmod(writable, 0o777)
	target := filepath.Join(shm, "target")
	os.Mkdir(target, 0o700)
	link := filepath.Join(shm, "link")
	os.Symlink(target, link)
	for _, c := range []struct{ dir, names string }{
		{userDir, userDir},
		{filepath.Join(userDir, "criu"), userDir},
		{writable, writable},
		{link, link},
	} {
		err := EnsureKerndat(c.dir)
		if err == nil || !strings.Contains(err.Error(), c.names) {
			t.Errorf("EnsureKerndat(%s) = %v, want it refused naming %s", c.dir, err, c.names)
		}
	}
	if _, err := os.Lstat(filepath.Join(userDir, "criu.kdat.tmp")); err != nil {
		t.Errorf("a refused directory was changed: %v", err)
	}
}

func TestKerndatStateSaysWhetherCRIUCaches(t *testing.T) {
	shm := shmDir(t)
	disk := t.TempDir()
	built := func(dir string) string { // a "CRIU" whose build names dir
		p := filepath.Join(t.TempDir(), "criu")
		os.WriteFile(p, []byte("\x7fELF...\x00"+filepath.Join(dir, "criu.kdat")+"\x00..."), 0o755)
		return p
	}
	cases := []struct {
		name, dir, criu, want string
	}{
		{"built for it, on a tmpfs", shm, built(shm), "cached in " + shm},
		{"built for it, not on a tmpfs", disk, built(disk), disk + " is not on a tmpfs"},
		{"built for /run", shm, built("/run"), "where it was built to, not in " + shm},
		{"no CRIU there", shm, filepath.Join(disk, "none"), "no such file"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := KerndatState(c.dir, c.criu); !strings.Contains(got, c.want) {
				t.Fatalf("KerndatState = %q, want it to say %q", got, c.want)
			}
		})
	}
}
