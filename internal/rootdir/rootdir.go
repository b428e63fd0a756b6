// Package rootdir makes and checks directories that only root controls:
// the agent's state and image directories, where it removes, unpacks and
// restores as root. A directory that another user could have made first,
// or could rename or replace, would let that user point the agent at
// files of their choosing. It must not follow a symlink anywhere on the
// path, and it does no other I/O.
package rootdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Ensure makes path, with mode (without write for group or others), where
// it is missing (its missing ancestors with 0755), and checks every
// component from the root down: a real directory (not a symlink), owned
// by root; an ancestor may be writable by others only when it is sticky
// (as /tmp and /dev/shm are: nobody can then remove or rename root's
// entries in it); path itself and what Ensure makes must not be writable
// by group or others. A component that fails is named in the error and
// left as it is.
func Ensure(path string, mode os.FileMode) error {
	if mode&0o022 != 0 {
		return fmt.Errorf("%s: mode %04o lets others write", path, mode)
	}
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%s: not an absolute path", path)
	}
	clean := filepath.Clean(path)
	parts := strings.Split(strings.TrimPrefix(clean, "/"), "/")
	cur := "/"
	if err := check(cur, clean == "/"); err != nil {
		return err
	}
	for i, p := range parts {
		if p == "" {
			continue
		}
		cur = filepath.Join(cur, p)
		last := i == len(parts)-1
		// A missing ancestor is made 0755 (root's, writable by none
		// else): others may need to pass through it (/run/roam holds the
		// socket every user talks to); only path itself takes mode.
		m := os.FileMode(0o755)
		if last {
			m = mode
		}
		if err := os.Mkdir(cur, m); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("%s: %w", cur, err)
		}
		if err := check(cur, last); err != nil {
			return err
		}
	}
	return nil
}

// check is one component's verdict; last is path itself.
func check(dir string, last bool) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s: a symlink; the agent's directories must be real directories owned by root (remove it, or choose another path)", dir)
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s: not a directory", dir)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("%s: no owner to check", dir)
	}
	if st.Uid != 0 {
		return fmt.Errorf("%s: owned by uid %d, not root; another user made it (remove it, or choose another path)", dir, st.Uid)
	}
	writable := fi.Mode().Perm()&0o022 != 0
	switch {
	case writable && last:
		return fmt.Errorf("%s: writable by group or others (mode %04o); make it 0700", dir, fi.Mode().Perm())
	case writable && fi.Mode()&fs.ModeSticky == 0:
		return fmt.Errorf("%s: writable by group or others and not sticky (mode %04o); anyone could replace what is below it", dir, fi.Mode().Perm())
	}
	return nil
}

// Check checks, as Ensure does, the components of path that exist, and
// makes nothing: for a path about to be removed, where a missing one is
// fine.
func Check(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%s: not an absolute path", path)
	}
	clean := filepath.Clean(path)
	cur := "/"
	for _, p := range strings.Split(clean, "/") {
		if p != "" {
			cur = filepath.Join(cur, p)
		}
		if _, err := os.Lstat(cur); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err := check(cur, cur == clean); err != nil {
			return err
		}
	}
	return nil
}
