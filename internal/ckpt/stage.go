package ckpt

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// A job in a user namespace of its own (roam-init -U) is restored into
// mount namespaces that CRIU creates owned by that user namespace. Every
// mount copied into them is locked there, and the kernel refuses a
// non-recursive bind of a mount with locked mounts under it: CRIU's bind
// of its root ("/", with /proc, /sys, /dev under it) and of an external
// mount such as /dev fail with EINVAL. So CRIU's worker runs in a mount
// namespace of its own, where each of these is first bound, without its
// submounts, into a tmpfs that only that namespace sees, and CRIU is given
// those binds instead. (Made in the node's own namespace, the binds would
// be copied into every job started meanwhile, whose next restore could
// not rebuild them.) docs/userns.md records the experiments.

// stage is a restore's plan for the worker's mount namespace.
type stage struct {
	dir  string   // an empty directory of the host's, the tmpfs's mount point
	srcs []string // host paths bound at dir/0, dir/1, ...
}

// root is the bind of "/" CRIU is given as its root.
func (s stage) root() string { return filepath.Join(s.dir, "root") }

// at is where host path src is bound, adding it to the plan.
func (s *stage) at(src string) string {
	i := slices.Index(s.srcs, src)
	if i < 0 {
		i = len(s.srcs)
		s.srcs = append(s.srcs, src)
	}
	return filepath.Join(s.dir, strconv.Itoa(i))
}

// start starts cmd (CRIU's worker) in the stage's namespace, made on an
// OS thread of the agent's own for the purpose: the thread unshares its
// mount namespace, makes the mounts, and forks the worker, which inherits
// that namespace; the thread is then let go of still locked, so the Go
// runtime ends it rather than run anything else in that namespace. The
// namespace, and the mounts in it, end with the worker. (Forking from a
// thread of the agent's costs nothing over a plain start, where
// re-executing the agent as the stage cost some 8 ms of Go's start-up,
// inside a lazy migration's freeze.)
func (s stage) start(cmd *exec.Cmd) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := s.mount(); err != nil {
			done <- fmt.Errorf("criu stage: %w", err)
			return
		}
		done <- cmd.Start()
	}()
	return <-done
}

// mount makes the stage's namespace, on the calling thread, which must be
// locked to its goroutine and never unlocked.
func (s stage) mount() error {
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("unshare the mount namespace: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if err := unix.Mount("roam-criu-stage", s.dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0700"); err != nil {
		return fmt.Errorf("mount a tmpfs at %s: %w", s.dir, err)
	}
	if err := bindFlat("/", s.root()); err != nil {
		return err
	}
	for i, src := range s.srcs {
		if err := bindFlat(src, filepath.Join(s.dir, strconv.Itoa(i))); err != nil {
			return err
		}
	}
	return nil
}

// bindFlat binds src at a new dst, without the mounts under src.
func bindFlat(src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	if fi.IsDir() {
		err = os.Mkdir(dst, 0o700)
	} else {
		err = os.WriteFile(dst, nil, 0o600)
	}
	if err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind %s: %w", src, err)
	}
	return nil
}

// inUserNS tells whether the images in dir are of a job in a user
// namespace of its own: CRIU writes a userns image only then.
func inUserNS(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "userns-*.img"))
	return len(m) > 0
}
