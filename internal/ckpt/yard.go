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
// The yard is root's alone (0700 on a root-only path, as KerndatDir): CRIU
// running as root moves the job into the groups it finds there.

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
// hierarchy's root in mountinfo. CRIU names a hierarchy by its
// controllers as /proc/PID/cgroup lists them, joined by commas, a named
// one ("name=systemd") by its name, and the cgroup2 one "unified"
// (cgroup.c: ctrl_dir_and_opt on restore, collect_cgroups on dump). A
// hierarchy with no mount of its root is left out: CRIU then mounts it in
// the yard itself. Pure: it reads only its arguments.
func yardNames(cgroupFile, mountinfo string) map[string]string {
	type mnt struct {
		point string
		opts  []string
	}
	var v1 []mnt
	v2 := ""
	for _, l := range strings.Split(mountinfo, "\n") {
		before, after, ok := strings.Cut(l, " - ")
		// One space between fields; see Mounts.
		f, g := strings.Split(before, " "), strings.Split(after, " ")
		if !ok || len(f) < 5 || f[3] != "/" || !strings.HasPrefix(f[4], "/") || len(g) < 3 {
			continue
		}
		switch g[0] {
		case "cgroup2":
			if v2 == "" {
				v2 = unescape(f[4])
			}
		case "cgroup":
			v1 = append(v1, mnt{unescape(f[4]), strings.Split(g[2], ",")})
		}
	}
	out := map[string]string{}
	for _, l := range strings.Split(cgroupFile, "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			continue
		}
		if f[1] == "" {
			if v2 != "" {
				out["unified"] = v2
			}
			continue
		}
		ctrls := strings.Split(f[1], ",")
		name := strings.TrimPrefix(f[1], "name=")
		if strings.ContainsAny(name, "/\x00") || name == "." || name == ".." || name == "unified" {
			continue
		}
	mounts:
		for _, m := range v1 {
			for _, c := range ctrls {
				if !slices.Contains(m.opts, c) {
					continue mounts
				}
			}
			out[name] = m.point
			break
		}
	}
	return out
}

// EnsureYard makes dir CRIU's cgroup yard for this process's mount
// namespace: root's alone, holding a bind mount of the root of each
// cgroup hierarchy this process is in, named as CRIU names it. What an
// earlier agent mounted there is unmounted first. It returns dir, or ""
// and an error when no yard could be made (CRIU then makes its own, as
// before).
func EnsureYard(dir string) (string, error) {
	if err := rootdir.Ensure(dir, 0o700); err != nil {
		return "", err
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return "", err
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	cg, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", err
	}
	// Deepest first, so that a mount on a mount goes before it.
	old := mountsBelow(string(mi), dir)
	slices.SortFunc(old, func(a, b string) int { return len(b) - len(a) })
	for _, p := range old {
		if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
			return "", fmt.Errorf("cgroup yard: unmount %s: %w", p, err)
		}
	}
	names := yardNames(string(cg), string(mi))
	if len(names) == 0 {
		return "", errors.New("cgroup yard: no cgroup hierarchy is mounted")
	}
	for name, src := range names {
		p := filepath.Join(dir, name)
		if err := os.Mkdir(p, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("cgroup yard: %w", err)
		}
		if err := unix.Mount(src, p, "", unix.MS_BIND, ""); err != nil {
			return "", fmt.Errorf("cgroup yard: bind %s on %s: %w", src, p, err)
		}
		// Not seen in other mount namespaces, nor they in it.
		if err := unix.Mount("", p, "", unix.MS_PRIVATE, ""); err != nil {
			return "", fmt.Errorf("cgroup yard: %s private: %w", p, err)
		}
	}
	return dir, nil
}

// UsableYard says whether dir is a yard EnsureYard made in this mount
// namespace: it holds a mount.
func UsableYard(dir string) bool {
	mi, err := os.ReadFile("/proc/self/mountinfo")
	return err == nil && len(mountsBelow(string(mi), dir)) > 0
}

// mountsBelow lists the mount points in mountinfo strictly below dir.
func mountsBelow(mountinfo, dir string) []string {
	var out []string
	prefix := filepath.Clean(dir) + "/"
	for _, l := range strings.Split(mountinfo, "\n") {
		f := strings.Split(l, " ")
		if len(f) < 5 {
			continue
		}
		if p := unescape(f[4]); strings.HasPrefix(p, prefix) {
			out = append(out, p)
		}
	}
	return out
}
