package cgroup

import (
	"os"
	"path/filepath"
	"testing"
)

// A CPU group is throttled by a CFS quota of its own or of any group
// above it, below the controller's root; -1 is no quota. Throttler names
// the highest.
func TestThrottler(t *testing.T) {
	root := t.TempDir()
	quota := func(rel, q string) {
		d := filepath.Join(root, rel)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "cpu.cfs_quota_us"), []byte(q+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	quota("", "20000") // the root's own is not a group's limit
	quota("roam", "-1")
	quota("roam/c/n1", "-1")
	quota("roam/c/n2", "20000")
	quota("capped", "50000")
	quota("capped/n3", "-1")
	quota("capped/n4", "10000")
	l := Layout{CPU: root}
	for rel, want := range map[string]string{"roam/c/n1": "", "roam/c/n2": "roam/c/n2", "/roam/c/n2": "/roam/c/n2",
		"capped/n3": "capped", "capped/n4": "capped", "roam": "", "missing/n9": ""} {
		if got := l.Throttler(rel); got != want {
			t.Errorf("Throttler(%q) = %q, want %q", rel, got, want)
		}
	}
	if got := (Layout{CPU: root, V2: true}).Throttler("roam/c/n2"); got != "" {
		t.Errorf("a v2 group said throttled by %q", got)
	}
}

// FavorDynMods reads the option from a cgroup mount's super options, on
// v1 or v2, and from no other file system's.
func TestFavorDynMods(t *testing.T) {
	const base = "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
	for mi, want := range map[string]bool{
		base: false,
		base + "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw,favordynmods\n": true,
		"33 31 0:30 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup rw,cpuacct,favordynmods\n":           true,
		"50 31 0:40 / /mnt/favordynmods rw,favordynmods - tmpfs tmpfs rw,favordynmods\n":             false,
		"": false,
	} {
		if got := FavorDynMods(mi); got != want {
			t.Errorf("FavorDynMods(%q) = %v, want %v", mi, got, want)
		}
	}
}
