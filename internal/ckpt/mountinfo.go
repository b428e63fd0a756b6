package ckpt

import "strings"

// mountEntry is one line of a mountinfo table (proc(5)): the root of the
// mount within its file system and its mount point, both unescaped, its
// file system's device (major:minor) and type, its source (unescaped) and
// its super options.
type mountEntry struct {
	root, point    string
	dev            string
	fstype, source string
	super          []string
}

// parseMountinfo reads a mountinfo table (/proc/PID/mountinfo). Fields are
// separated by one space: a path's spaces, tabs, newlines and backslashes
// are escaped, but not other white space (strings.Fields would split at a
// form feed). A line without the separator " - ", with fewer than five
// fields before it, or whose mount point is not a path is left out.
func parseMountinfo(mountinfo string) []mountEntry {
	var out []mountEntry
	for _, l := range strings.Split(mountinfo, "\n") {
		before, after, ok := strings.Cut(l, " - ")
		f, g := strings.Split(before, " "), strings.Split(after, " ")
		if !ok || len(f) < 5 || !strings.HasPrefix(f[4], "/") {
			continue
		}
		e := mountEntry{root: unescape(f[3]), point: unescape(f[4]), dev: f[2], fstype: g[0]}
		if len(g) >= 2 {
			e.source = unescape(g[1])
		}
		if len(g) >= 3 {
			e.super = strings.Split(g[2], ",")
		}
		out = append(out, e)
	}
	return out
}

// hostPath is where the host (the mounts of a mountinfo table, the
// agent's) shows the directory root of the file system dev, which a
// mount in another namespace binds: below the mount point of a mount of
// dev whose root holds it, the longest such root. It is root itself when
// no mount of dev shows it: the file system is mounted at its own root,
// as / is.
func hostPath(host []mountEntry, dev, root string) string {
	best, at := -1, root
	for _, m := range host {
		rel, ok := strings.CutPrefix(root, m.root)
		if m.dev != dev || !ok || (rel != "" && !strings.HasPrefix(rel, "/") && m.root != "/") || len(m.root) <= best {
			continue
		}
		if m.root == "/" {
			rel = root
		}
		best, at = len(m.root), strings.TrimSuffix(m.point, "/")+rel
		if at == "" {
			at = "/"
		}
	}
	return at
}
