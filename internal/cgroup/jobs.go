package cgroup

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Jobs are the cgroups of one node's jobs: Parent/jobs/ID under every
// controller, one group a job. A job's CPU time and memory are counted
// there, whichever process of it started or ended; and a job is not in the
// agent's group, so whatever stops or restarts the agent leaves its jobs
// alone.
//
// A group is in use from Enter until its release, and then while it holds
// a process; Tidy removes the others.
type Jobs struct {
	Layout Layout
	// Parent is the group jobs/ is made under: the node's group on an
	// emulated cluster, a top-level group of roam's own on a real host.
	Parent string

	mu   sync.Mutex
	busy map[string]int
}

// Rel is job id's group relative to the controllers' mounts.
func (j *Jobs) Rel(id string) string { return filepath.Join(j.Parent, "jobs", id) }

// validName refuses a job id that is not one plain file name: ids come
// from peers, and a group is a directory.
func validName(id string) error {
	if id == "" || id == "." || id == ".." || len(id) > 128 || strings.ContainsAny(id, "/\x00") {
		return fmt.Errorf("cgroup: job id %q is not a valid group name", id)
	}
	return nil
}

// Enter creates job id's group (its parents too) and keeps it from Tidy
// until release is called: the caller then puts a process in it. procs
// are the cgroup.procs files to write, the CPU controller's first. Under
// v1 that is Parent's own CPU group: the job's group holds its memory and
// CPU accounting, but a CPU group a job would make every job a scheduling
// entity of its own below the node's quota, where work that wakes inside a
// job (its setup, CRIU's parasite at a dump) waited seconds on a loaded
// slow node for its group's turn.
func (j *Jobs) Enter(id string) (procs []string, release func(), err error) {
	if err := validName(id); err != nil {
		return nil, nil, err
	}
	j.mu.Lock()
	if j.busy == nil {
		j.busy = map[string]int{}
	}
	j.busy[id]++
	rel := j.Rel(id)
	var dirs []string
	if j.Layout.V2 {
		err = j.Layout.Create(rel)
		dirs = j.Layout.Dirs(rel)
	} else if err = j.Layout.Create(j.Parent); err == nil {
		dirs = append([]string{filepath.Join(j.Layout.CPU, j.Parent)}, j.Layout.Dirs(rel)[1:]...)
		for _, d := range dirs[1:] {
			if err = os.MkdirAll(d, 0o755); err != nil {
				break
			}
		}
	}
	j.mu.Unlock()
	release = func() {
		j.mu.Lock()
		if j.busy[id]--; j.busy[id] <= 0 {
			delete(j.busy, id)
		}
		j.mu.Unlock()
	}
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("cgroup %s: %w", rel, err)
	}
	for _, d := range dirs {
		procs = append(procs, filepath.Join(d, "cgroup.procs"))
	}
	return procs, release, nil
}

// CPURel is the CPU group a job of this node runs in: its own under v2,
// Parent under v1 (see Enter).
func (j *Jobs) CPURel(id string) string {
	if j.Layout.V2 {
		return j.Rel(id)
	}
	return j.Parent
}

// Tidy removes the groups of jobs that no longer have a process here
// (ended, or moved to another node), that nobody is entering and that
// keep does not keep: an ended job's group counts what it used until its
// home has it (job.Processes.Tidy).
func (j *Jobs) Tidy(keep func(id string) bool) {
	base := filepath.Join(j.Layout.Memory, j.Parent, "jobs")
	ents, err := os.ReadDir(base)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		id := e.Name()
		// keep is asked without the lock: it may take the agent's.
		if keep != nil && keep(id) {
			continue
		}
		// Held until the group is gone, so that no Enter of the same id
		// finds it made and then loses it.
		j.mu.Lock()
		if j.busy[id] == 0 && len(j.Layout.Procs(j.Rel(id))) == 0 {
			_ = j.Layout.Remove(j.Rel(id))
		}
		j.mu.Unlock()
	}
}

// Usage is job id's CPU seconds and resident memory (anonymous and mapped
// file pages) as its group counts them; ok is false when the group or its
// counters are missing.
func (j *Jobs) Usage(id string) (cpuSeconds, rssMB float64, ok bool) {
	if validName(id) != nil {
		return 0, 0, false
	}
	rel := j.Rel(id)
	l := j.Layout
	var rss int64
	if l.V2 {
		st := readKeyed(filepath.Join(l.CPU, rel, "cpu.stat"))
		usec, ok1 := st["usage_usec"]
		mem := readKeyed(filepath.Join(l.Memory, rel, "memory.stat"))
		anon, ok2 := mem["anon"]
		if !ok1 || !ok2 {
			return 0, 0, false
		}
		cpuSeconds = float64(usec) / 1e6
		rss = anon + mem["file_mapped"]
	} else {
		if l.CPUAcct == "" {
			return 0, 0, false
		}
		ns, err := readInt(filepath.Join(l.CPUAcct, rel, "cpuacct.usage"))
		mem := readKeyed(filepath.Join(l.Memory, rel, "memory.stat"))
		anon, ok2 := mem["total_rss"]
		if err != nil || !ok2 {
			return 0, 0, false
		}
		cpuSeconds = float64(ns) / 1e9
		rss = anon + mem["total_mapped_file"]
	}
	return cpuSeconds, float64(rss) / (1 << 20), true
}

// readKeyed reads a "key value" per line file (cpu.stat, memory.stat).
func readKeyed(path string) map[string]int64 {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	out := map[string]int64{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
			out[k] = n
		}
	}
	return out
}
