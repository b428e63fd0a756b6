package ckpt

// CRIU's cgroup yard. A restore in CRIU's soft cgroup mode, and a dump of
// the job's cgroups, open every cgroup hierarchy of the host. Left to
// itself, CRIU mounts each one again in a directory of its own for every
// call and unmounts it after. Mounting a cgroup v1 hierarchy again is
// cheap, but mounting cgroup2 costs 0 to 17 ms on this kernel (measured in
// restore.log, "Making controller dir .criu.cgyard.X/unified": 10 ms on
// average over 18 restores), and a migration's restore runs while the job
// is stopped. CRIU takes a yard made beforehand (--cgroup-yard): a
// directory holding each hierarchy at the name CRIU gives it. The agent
// makes one at start with a bind mount of each hierarchy's root, which
// costs no new mount of cgroup2, and CRIU then mounts nothing.
//
// The yard is root's alone (a 0700 tmpfs on a root-only path, as
// KerndatDir): CRIU running as root moves the job into the groups it
// finds there. The tmpfs is the agent's, so that what CRIU makes in it
// (it mounts a hierarchy of the images that the yard lacks, and leaves
// that mount) goes at the agent's next start, and so that the emulated
// nodes, which share the host's /run, each have their own.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/sys/unix"

	"roam/internal/rootdir"
)

// YardDir is where the agent keeps CRIU's cgroup yard.
const YardDir = "/run/roam/cgyard"

// yardNames maps CRIU's name of each cgroup hierarchy the process is in
// (its line of /proc/self/cgroup, cgroupFile) to the mount point of that
// hierarchy's root in mountinfo, leaving out mounts at or below skip (the
// yard itself). CRIU names a hierarchy by its controllers as
// /proc/PID/cgroup lists them, joined by commas, a named one
// ("name=systemd") by its name, and the cgroup2 one "unified" (cgroup.c:
// ctrl_dir_and_opt on restore, collect_cgroups on dump). missing lists
// the hierarchies it cannot name so, or finds no mount of the root of:
// CRIU's dump fails on a hierarchy missing from a yard, so a yard needs
// none missing. Pure: it reads only its arguments.
func yardNames(cgroupFile, mountinfo, skip string) (names map[string]string, missing []string) {
	var v1 []mountEntry
	v2 := ""
	skip = filepath.Clean(skip)
	for _, m := range parseMountinfo(mountinfo) {
		if m.root != "/" || m.super == nil || m.point == skip || strings.HasPrefix(m.point, skip+"/") {
			continue
		}
		switch m.fstype {
		case "cgroup2":
			if v2 == "" {
				v2 = m.point
			}
		case "cgroup":
			v1 = append(v1, m)
		}
	}
	names = map[string]string{}
	for _, l := range strings.Split(cgroupFile, "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[1] == "" {
			if v2 == "" {
				missing = append(missing, "cgroup2")
			} else {
				names["unified"] = v2
			}
			continue
		}
		ctrls := strings.Split(f[1], ",")
		name := strings.TrimPrefix(f[1], "name=")
		// A named hierarchy with controllers too is dumped under one name
		// and restored under another; a name with a slash leaves the yard.
		if (len(ctrls) > 1 && strings.Contains(f[1], "name=")) || strings.ContainsAny(name, "/\x00") ||
			name == "." || name == ".." || name == "unified" {
			missing = append(missing, f[1])
			continue
		}
		found := false
	mounts:
		for _, m := range v1 {
			for _, c := range ctrls {
				if !slices.Contains(m.super, c) {
					continue mounts
				}
			}
			names[name], found = m.point, true
			break
		}
		if !found {
			missing = append(missing, f[1])
		}
	}
	return names, missing
}

// EnsureYard makes dir CRIU's cgroup yard for this process's mount
// namespace: a private tmpfs, root's alone, holding a bind mount of the
// root of each cgroup hierarchy this process is in, named as CRIU names
// it. What an earlier agent, or CRIU, left there is removed first; the
// tmpfs itself is kept, so that a restart adds no mount where /run's
// mounts propagate. It returns dir, or "" and an error, with nothing
// mounted below dir, when some hierarchy cannot be had (CRIU then mounts
// the hierarchies itself, as it does without a yard).
func EnsureYard(dir string) (string, error) {
	if err := rootdir.Ensure(dir, 0o700); err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return "", err
	}
	if err := clearYard(dir); err != nil {
		return "", err
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	if !isTmpfsMount(string(mi), dir) {
		if err := unix.Mount("roam-cgyard", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "mode=0700,size=64k"); err != nil {
			return "", fmt.Errorf("cgroup yard: tmpfs on %s: %w", dir, err)
		}
	}
	// Private before anything is mounted in it: nothing below it is seen
	// in another mount namespace.
	if err := unix.Mount("", dir, "", unix.MS_PRIVATE, ""); err != nil {
		return "", fmt.Errorf("cgroup yard: %s private: %w", dir, err)
	}
	if mi, err = os.ReadFile("/proc/self/mountinfo"); err != nil {
		return "", err
	}
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	names, missing := yardNames(string(cg), string(mi), dir)
	if len(missing) > 0 || len(names) == 0 {
		return "", fmt.Errorf("cgroup yard: no mount of the root of cgroup hierarchies %q", missing)
	}
	for name, src := range names {
		p := filepath.Join(dir, name)
		err := os.Mkdir(p, 0o700)
		if err == nil {
			err = unix.Mount(src, p, "", unix.MS_BIND, "")
		}
		if err == nil {
			err = unix.Mount("", p, "", unix.MS_PRIVATE, "")
		}
		if err != nil {
			clearYard(dir)
			return "", fmt.Errorf("cgroup yard: bind %s on %s: %w", src, p, err)
		}
	}
	return dir, nil
}

// clearYard unmounts everything below dir (deepest first) and removes
// what is left in it, but not dir or a mount on it.
func clearYard(dir string) error {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	old := mountsBelow(string(mi), dir)
	slices.SortFunc(old, func(a, b string) int { return len(b) - len(a) })
	for _, p := range old {
		if err := unix.Unmount(p, unix.MNT_DETACH|unix.UMOUNT_NOFOLLOW); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("cgroup yard: unmount %s: %w", p, err)
		}
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return fmt.Errorf("cgroup yard: %w", err)
		}
	}
	return nil
}

// isTmpfsMount says whether mountinfo has a tmpfs mounted on dir.
func isTmpfsMount(mountinfo, dir string) bool {
	dir = filepath.Clean(dir)
	return slices.ContainsFunc(parseMountinfo(mountinfo), func(m mountEntry) bool { return m.point == dir && m.fstype == "tmpfs" })
}

// UsableYard says whether dir is a yard EnsureYard made in this mount
// namespace: it holds a mount of every hierarchy this process is in.
func UsableYard(dir string) bool {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return false
	}
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return false
	}
	names, missing := yardNames(string(cg), string(mi), dir)
	below := mountsBelow(string(mi), dir)
	if len(missing) > 0 || len(names) == 0 {
		return false
	}
	for name := range names {
		if !slices.Contains(below, filepath.Join(dir, name)) {
			return false
		}
	}
	return true
}

// mountsBelow lists the mount points in mountinfo strictly below dir.
func mountsBelow(mountinfo, dir string) []string {
	var out []string
	prefix := filepath.Clean(dir) + "/"
	for _, m := range parseMountinfo(mountinfo) {
		if strings.HasPrefix(m.point, prefix) {
			out = append(out, m.point)
		}
	}
	return out
}
