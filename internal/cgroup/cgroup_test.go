package cgroup

import (
	"os"
	"path/filepath"
	"testing"
)

// A CPU group is throttled by a CFS quota of its own or of any group
// above it, below the controller's root; -1 is no quota.
func TestThrottled(t *testing.T) {
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
	l := Layout{CPU: root}
	for rel, want := range map[string]bool{"roam/c/n1": false, "roam/c/n2": true, "capped/n3": true, "roam": false, "missing/n9": false} {
		if got := l.Throttled(rel); got != want {
			t.Errorf("Throttled(%q) = %v, want %v", rel, got, want)
		}
	}
	if (Layout{CPU: root, V2: true}).Throttled("roam/c/n2") {
		t.Error("a v2 group said throttled")
	}
}
