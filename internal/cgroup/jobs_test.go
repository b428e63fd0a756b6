package cgroup

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"roam/internal/resources"
)

// A job id names a directory: one that is not a plain name is refused
// before anything is made.
func TestJobGroupNames(t *testing.T) {
	j := &Jobs{Layout: Layout{CPU: "/nonexistent/cpu", Memory: "/nonexistent/memory"}, Parent: "roam"}
	for _, id := range []string{"", ".", "..", "../etc", "a/b", "x\x00y", string(make([]byte, 129))} {
		if _, _, err := j.Enter(id, Limits{}); err == nil {
			t.Errorf("Enter(%q) made a group", id)
		}
		if _, _, ok := j.Usage(id); ok {
			t.Errorf("Usage(%q) read a group", id)
		}
	}
	if got := j.Rel("n1.7"); got != "roam/jobs/n1.7" {
		t.Errorf("Rel = %q", got)
	}
	if _, _, err := j.Enter("n1.7", Limits{}); err == nil {
		t.Errorf("Enter made a group under a missing controller")
	}
	if len(j.busy) != 0 {
		t.Errorf("a failed Enter left the group busy: %v", j.busy)
	}
}

// Enter gives a job's group the limits of its request: memory (and
// memory with swap, where the host counts it), processes, and a CPU
// quota in a CPU group of its own only where the quota binds; under v1 a
// job without one shares the node's CPU group.
func TestEnterLimits(t *testing.T) {
	root := t.TempDir()
	mk := func(parts ...string) string {
		p := filepath.Join(append([]string{root}, parts...)...)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []string{"cpu", "memory", "pids", "cpuacct"} {
		mk(c, "cgroup.procs")
	}
	rel := "roam/jobs/n1.7"
	mk("memory", "roam/jobs", "memory.memsw.limit_in_bytes") // the host counts swap
	l := Layout{CPU: filepath.Join(root, "cpu"), Memory: filepath.Join(root, "memory"), Pids: filepath.Join(root, "pids"), CPUAcct: filepath.Join(root, "cpuacct")}
	j := &Jobs{Layout: l, Parent: "roam", Cores: 2, Pids: 100, Memory: 1 << 30}
	lim := j.LimitsFor(resources.Request{MilliCPUs: 500, MemBytes: 64 << 20})
	if lim != (Limits{CPUQuotaUS: 50000, MemBytes: 64 << 20, Pids: 100}) {
		t.Fatalf("LimitsFor = %+v", lim)
	}
	procs, release, err := j.Enter("n1.7", lim)
	if err != nil {
		t.Fatal(err)
	}
	release()
	read := func(parts ...string) string {
		b, _ := os.ReadFile(filepath.Join(append([]string{root}, parts...)...))
		return string(b)
	}
	for f, want := range map[string]string{
		"memory/" + rel + "/memory.limit_in_bytes":       "67108864",
		"memory/" + rel + "/memory.memsw.limit_in_bytes": "67108864",
		"memory/roam/jobs/memory.limit_in_bytes":         "1073741824",
		"pids/" + rel + "/pids.max":                      "100",
		"cpu/" + rel + "/cpu.cfs_quota_us":               "50000",
		"cpu/" + rel + "/cpu.cfs_period_us":              "100000",
	} {
		if got := read(strings.Split(f, "/")...); got != want {
			t.Errorf("%s = %q, want %q", f, got, want)
		}
	}
	wantProcs := []string{filepath.Join(root, "cpu", rel, "cgroup.procs"), filepath.Join(root, "memory", rel, "cgroup.procs"),
		filepath.Join(root, "cpuacct", rel, "cgroup.procs"), filepath.Join(root, "pids", rel, "cgroup.procs")}
	if !slices.Equal(procs, wantProcs) {
		t.Errorf("procs = %q, want %q", procs, wantProcs)
	}
	if got := j.CPURel("n1.7"); got != rel {
		t.Errorf("CPURel = %q, want its own group %q", got, rel)
	}
	// No quota where the request is the node's whole capacity: the job
	// joins the node's CPU group, and has no memory limit of its own.
	lim = j.LimitsFor(resources.Request{MilliCPUs: 2000})
	if lim != (Limits{Pids: 100}) {
		t.Fatalf("LimitsFor(whole node) = %+v", lim)
	}
	procs, release, err = j.Enter("n1.8", lim)
	if err != nil {
		t.Fatal(err)
	}
	release()
	if procs[0] != filepath.Join(root, "cpu", "roam", "cgroup.procs") {
		t.Errorf("the CPU group of a job without a quota is %q", procs[0])
	}
	if got := read("memory", "roam/jobs/n1.8", "memory.limit_in_bytes"); got != "-1" {
		t.Errorf("memory limit without a request = %q", got)
	}
	// The steps of a job's groups, which the job-start benchmark's local
	// loop takes: those Enter took for n1.8.
	st, err := j.Steps("n1.8", lim)
	if err != nil {
		t.Fatal(err)
	}
	var writes []string
	for _, w := range st.Writes {
		if got := read(strings.Split(strings.TrimPrefix(w.Path, root+"/"), "/")...); got != w.Value {
			t.Errorf("step %s = %q, Enter wrote %q", w.Path, w.Value, got)
		}
		writes = append(writes, strings.TrimPrefix(w.Path, root+"/memory/roam/jobs/n1.8/"))
	}
	if want := []string{"memory.memsw.limit_in_bytes", "memory.limit_in_bytes", "memory.memsw.limit_in_bytes", root + "/pids/roam/jobs/n1.8/pids.max"}; !slices.Equal(writes, want) {
		t.Errorf("steps write %q, want %q", writes, want)
	}
	if want := procs[1:]; len(st.Make) != 3 || !slices.Equal(st.Join, procs) || st.Make[0]+"/cgroup.procs" != want[0] {
		t.Errorf("steps make %q and join %q; Enter joins %q", st.Make, st.Join, procs)
	}
	// v2: one group, cpu.max, memory.max with no swap.
	v2 := Layout{V2: true, CPU: filepath.Join(root, "v2"), Memory: filepath.Join(root, "v2"), Pids: filepath.Join(root, "v2")}
	mk("v2", "cgroup.procs")
	mk("v2", "roam/jobs", "memory.swap.max")
	j2 := &Jobs{Layout: v2, Parent: "roam", Cores: 2, Pids: 100}
	if _, release, err := j2.Enter("n1.7", j2.LimitsFor(resources.Request{MilliCPUs: 500, MemBytes: 64 << 20})); err != nil {
		t.Fatal(err)
	} else {
		release()
	}
	for f, want := range map[string]string{"memory.max": "67108864", "memory.swap.max": "0", "cpu.max": "50000 100000", "pids.max": "100"} {
		if got := read("v2", rel, f); got != want {
			t.Errorf("v2 %s = %q, want %q", f, got, want)
		}
	}
}

// Tidy removes an ended job's groups under every controller, and leaves
// whole those of a job with a process, its memory group tried first (its
// CPU group, which a starting job joins last, is never taken from it).
func TestTidy(t *testing.T) {
	root := t.TempDir()
	l := Layout{CPU: filepath.Join(root, "cpu"), Memory: filepath.Join(root, "memory"), Pids: filepath.Join(root, "pids"), CPUAcct: filepath.Join(root, "cpuacct")}
	j := &Jobs{Layout: l, Parent: "roam"}
	for _, id := range []string{"n1.1", "n1.2"} {
		for _, d := range l.Dirs(j.Rel(id)) {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	// A process of n1.2 in its memory group (an empty directory stands
	// for a group without one: rmdir takes it, as the kernel's would).
	if err := os.WriteFile(filepath.Join(l.Memory, j.Rel("n1.2"), "cgroup.procs"), []byte("4242\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	j.Tidy(nil)
	if l.Exists(j.Rel("n1.1")) || len(j.Layout.Procs(j.Rel("n1.1"))) != 0 {
		t.Errorf("the ended job's groups are left")
	}
	for _, d := range l.Dirs(j.Rel("n1.2")) {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("the running job lost its group %s", d)
		}
	}
}
