package cgroup

import "testing"

// A job id names a directory: one that is not a plain name is refused
// before anything is made.
func TestJobGroupNames(t *testing.T) {
	j := &Jobs{Layout: Layout{CPU: "/nonexistent/cpu", Memory: "/nonexistent/memory"}, Parent: "roam"}
	for _, id := range []string{"", ".", "..", "../etc", "a/b", "x\x00y", string(make([]byte, 129))} {
		if _, _, err := j.Enter(id); err == nil {
			t.Errorf("Enter(%q) made a group", id)
		}
		if _, _, ok := j.Usage(id); ok {
			t.Errorf("Usage(%q) read a group", id)
		}
	}
	if got := j.Rel("n1.7"); got != "roam/jobs/n1.7" {
		t.Errorf("Rel = %q", got)
	}
	if _, _, err := j.Enter("n1.7"); err == nil {
		t.Errorf("Enter made a group under a missing controller")
	}
	if len(j.busy) != 0 {
		t.Errorf("a failed Enter left the group busy: %v", j.busy)
	}
}
