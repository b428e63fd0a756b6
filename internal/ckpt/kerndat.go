package ckpt

// CRIU's cache of kernel facts. Every CRIU call (dump, restore, the
// lazy-pages daemon) first learns what the kernel can do: some twenty
// probes, among them running iptables, about 15-25 ms on this machine.
// CRIU keeps what it learnt in KDAT_RUNDIR/criu.kdat and reads it back
// in well under a millisecond, but only writes it on a tmpfs, so that a
// reboot (a new kernel) drops it. A migration pays this twice while the
// job is stopped (the destination's restore, and for a lazy move also
// the lazy-pages daemon), and once more on the source before the freeze.
//
// roam's CRIU (scripts/deps.sh) is built to keep the cache in KerndatDir,
// a directory of root's alone: a forged cache would make CRIU, which
// runs as root, misjudge the kernel. On a host whose /run is a tmpfs (any
// systemd host) the cache works as is; an emulated node mounts a tmpfs
// there in its own mount namespace (emu.startAgent).

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"

	"golang.org/x/sys/unix"
)

// KerndatDir is where roam's CRIU keeps its kernel facts (RUNDIR of its
// build, see scripts/deps.sh).
const KerndatDir = "/run/roam/criu"

// PrepareKerndat makes dir for CRIU's cache, root's only, and says
// whether CRIU can keep its cache there. It looks at dir itself, not
// where a symlink there points: anything but a directory of root's alone
// is reported.
func PrepareKerndat(dir string) string {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return fmt.Sprintf("CRIU's kernel facts not cached: %v", err)
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return fmt.Sprintf("CRIU's kernel facts not cached: %v", err)
	}
	return kerndatState(dir)
}

// kerndatState says whether dir is fit for CRIU's cache.
func kerndatState(dir string) string {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Sprintf("CRIU's kernel facts not cached: %v", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || st.Uid != 0 || fi.Mode().Perm()&0o077 != 0 {
		return fmt.Sprintf("CRIU's kernel facts not cached: %s is not a directory of root's alone (%v)", dir, fi.Mode())
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return fmt.Sprintf("CRIU's kernel facts not cached: %v", err)
	}
	if fs.Type != unix.TMPFS_MAGIC {
		return fmt.Sprintf("CRIU's kernel facts not cached: %s is not on a tmpfs (each CRIU call probes the kernel, 15-25 ms)", dir)
	}
	return "CRIU's kernel facts cached in " + dir
}
