package ckpt

// CRIU's cache of kernel facts. Every CRIU call (dump, restore, the
// lazy-pages daemon) first learns what the kernel can do: some twenty
// probes, among them running iptables, about 15-25 ms on this machine.
// CRIU keeps what it learnt in RUNDIR/criu.kdat and reads it back in well
// under a millisecond, but only writes it on a tmpfs, so that a reboot (a
// new kernel) drops it. A migration pays this twice while the job is
// stopped (the destination's restore, and for a lazy move also the
// lazy-pages daemon), and once more on the source before the freeze.
//
// roam's CRIU (scripts/deps.sh) is built to keep the cache in KerndatDir.
// Root's CRIU believes whatever criu.kdat it finds there, so the path
// must be root's alone, as the agent's state and image directories are.
// On a host whose /run is a tmpfs (any systemd host) the cache works as
// is; an emulated node mounts a tmpfs there in its own mount namespace
// (emu.startAgent).

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"roam/internal/rootdir"
)

// KerndatDir is where roam's CRIU keeps its kernel facts (RUNDIR of its
// build, see scripts/deps.sh).
const KerndatDir = "/run/roam/criu"

// kerndatFile is CRIU's name for its cache, and kerndatTmp the file it
// writes first and renames. A CRIU that fails between the two removes the
// cache instead of its temporary file, which it then can never create
// again (O_EXCL): every later call probes the kernel.
const (
	kerndatFile = "criu.kdat"
	kerndatTmp  = "criu.kdat.tmp"
)

// EnsureKerndat makes dir root's alone (every component a real directory
// of root's that others cannot write, dir itself 0700) and removes a
// temporary file a failed CRIU left there. An error names the component
// that is not root's: the agent does not start, as CRIU would read
// kernel facts someone else could have written.
func EnsureKerndat(dir string) error {
	if err := rootdir.Ensure(dir, 0o700); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return err
	}
	if err := os.Remove(filepath.Join(dir, kerndatTmp)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// KerndatState says whether the CRIU at criuPath caches its kernel facts
// in dir: built to (the path is in the binary) and able to (a tmpfs).
func KerndatState(dir, criuPath string) string {
	bin, err := os.ReadFile(criuPath)
	if err != nil {
		return fmt.Sprintf("CRIU's kernel facts: %v", err)
	}
	if !bytes.Contains(bin, []byte(filepath.Join(dir, kerndatFile))) {
		return fmt.Sprintf("CRIU's kernel facts: %s keeps them where it was built to, not in %s (scripts/deps.sh builds one that does)", criuPath, dir)
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return fmt.Sprintf("CRIU's kernel facts not cached: %v", err)
	}
	if st.Type != unix.TMPFS_MAGIC {
		return fmt.Sprintf("CRIU's kernel facts not cached: %s is not on a tmpfs (each CRIU call probes the kernel, 15-25 ms)", dir)
	}
	return "CRIU's kernel facts cached in " + dir
}
