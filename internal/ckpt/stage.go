package ckpt

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

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

// stageEnv marks a process started as that worker: it sets up the
// namespace and becomes CRIU (see init).
const stageEnv = "ROAM_CRIU_STAGE"

// Every program that restores with this package (roamd, roam-ckpt, the
// tests) is also the stage: started again as itself with stageEnv set, it
// does the stage's work before any of its own.
func init() {
	if os.Getenv(stageEnv) == "1" {
		os.Exit(stageMain(os.Args[1:]))
	}
}

// stage is a restore's plan for the worker's mount namespace.
type stage struct {
	dir  string   // an empty directory of the host's, the tmpfs's mount point
	srcs []string // host paths bound at dir/0, dir/1, ...
	log  string   // where a failure is written, as CRIU would (restore.log)
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

// args is the stage's command line before "--" and CRIU's.
func (s stage) args() []string {
	return append([]string{s.dir, s.log, strconv.Itoa(len(s.srcs))}, s.srcs...)
}

// stageMain is the stage process: the mounts, then CRIU. args are
// stage.args, "--", then CRIU's path and arguments. A failure is written
// to the restore's log, where the agent reads CRIU's errors, and the
// process exits without running CRIU.
func stageMain(args []string) int {
	dash := slices.Index(args, "--")
	if dash < 3 || dash+1 >= len(args) {
		fmt.Fprintln(os.Stderr, "roam: criu stage: malformed arguments")
		return 2
	}
	s := stage{dir: args[0], log: args[1], srcs: args[3:dash]}
	if n, err := strconv.Atoi(args[2]); err != nil || n != len(s.srcs) {
		fmt.Fprintln(os.Stderr, "roam: criu stage: malformed arguments")
		return 2
	}
	if err := s.mount(); err != nil {
		if f, ferr := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600); ferr == nil {
			fmt.Fprintf(f, "Error (roam stage): %v\n", err)
			f.Close()
		}
		return 1
	}
	env := slices.DeleteFunc(os.Environ(), func(e string) bool { return e == stageEnv+"=1" })
	err := syscall.Exec(args[dash+1], args[dash+1:], env)
	fmt.Fprintf(os.Stderr, "roam: criu stage: %v\n", err)
	return 1
}

// mount makes the stage's namespace (package init runs on the main
// thread, locked to it: the namespace is that thread's, which the exec
// makes the process's).
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
