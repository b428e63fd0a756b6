package ckpt

import "strings"

// mountEntry is one line of a mountinfo table (proc(5)): the root of the
// mount within its file system and its mount point, both unescaped, its
// file system type, its source (unescaped) and its super options.
type mountEntry struct {
	root, point    string
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
		e := mountEntry{root: unescape(f[3]), point: unescape(f[4]), fstype: g[0]}
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
