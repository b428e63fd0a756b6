package ckpt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPrepareKerndatSaysWhetherCRIUCanCache(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the directory must be root's")
	}
	shm, err := os.MkdirTemp("/dev/shm", "roam-kdat-")
	if err != nil {
		t.Skip("no /dev/shm:", err)
	}
	t.Cleanup(func() { os.RemoveAll(shm) })
	disk := t.TempDir()

	cases := []struct {
		name string
		dir  func() string
		want string
	}{
		{"a new directory on a tmpfs", func() string { return filepath.Join(shm, "run", "criu") }, "cached in "},
		{"a directory not on a tmpfs", func() string { return filepath.Join(disk, "criu") }, "is not on a tmpfs"},
		{"a directory others may write", func() string {
			d := filepath.Join(shm, "open")
			os.Mkdir(d, 0o777)
			os.Chmod(d, 0o777)
			return d
		}, "not a directory of root's alone"},
		{"a symlink to a tmpfs directory", func() string {
			target := filepath.Join(shm, "target")
			os.Mkdir(target, 0o700)
			l := filepath.Join(shm, "link")
			os.Symlink(target, l)
			return l
		}, "not a directory of root's alone"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := c.dir()
			got := PrepareKerndat(dir)
			if !strings.Contains(got, c.want) || !strings.Contains(got, dir) {
				t.Fatalf("PrepareKerndat(%s) = %q, want it to say %q and name the directory", dir, got, c.want)
			}
		})
	}
	// The new directory is root's alone.
	fi, err := os.Lstat(filepath.Join(shm, "run", "criu"))
	if err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
		t.Fatalf("made %v (%v), want a 0700 directory", fi.Mode(), err)
	}
}
