package cgroup

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"roam/internal/resources"
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
	// Cores is the node's CPU capacity: a job's CPU request gets a quota
	// only where it is less (resources.Request.QuotaBinds).
	Cores float64
	// Pids bounds each job's processes and threads (pids.max); 0: none.
	Pids int64
	// Memory, when set, limits all the jobs of the node together (the
	// memory limit of Parent/jobs): what the node gives its jobs, so
	// that a job without a memory request of its own meets the kernel's
	// OOM killer among the jobs, never the agent or the host.
	Memory int64

	mu   sync.Mutex
	busy map[string]int
	// limited: Parent/jobs has its memory limit.
	limited bool
}

// Limits are what a job's group holds it to; a zero field is no limit of
// that kind.
type Limits struct {
	// CPUQuotaUS is the job's CFS quota per CFSPeriodUS; with one, the
	// job has a CPU group of its own (Enter).
	CPUQuotaUS int64
	MemBytes   int64
	Pids       int64
}

// LimitsFor is what a job of request r is held to on this node: its
// memory request, a CPU quota where it binds (less than the node has),
// and the node's bound on a job's processes.
func (j *Jobs) LimitsFor(r resources.Request) Limits {
	l := Limits{MemBytes: r.MemBytes, Pids: j.Pids}
	if r.QuotaBinds(j.Cores) {
		l.CPUQuotaUS = r.MilliCPUs * CFSPeriodUS / resources.MilliPerCPU
	}
	return l
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

// Enter creates job id's group (its parents too), gives it lim's limits,
// and keeps it from Tidy until release is called: the caller then puts a
// process in it. procs are the cgroup.procs files to write, the CPU
// controller's first. Under v1 that is Parent's own CPU group unless the
// job has a CPU quota: the job's group holds its memory, processes and
// CPU accounting, but a CPU group a job would make every job a
// scheduling entity of its own below the node's quota, where work that
// wakes inside a job (its setup, CRIU's parasite at a dump) waited
// seconds on a loaded slow node for its group's turn. A job with a quota
// pays that for its limit, which its user asked for.
//
// The limits are written at every Enter, over whatever the group held:
// a restore's group is made here before CRIU runs, so that CRIU (whose
// soft mode writes no property of a group that exists) restores into the
// request's limits, never the images'.
func (j *Jobs) Enter(id string, lim Limits) (procs []string, release func(), err error) {
	if err := validName(id); err != nil {
		return nil, nil, err
	}
	j.mu.Lock()
	if j.busy == nil {
		j.busy = map[string]int{}
	}
	j.busy[id]++
	rel := j.Rel(id)
	join, own := j.groups(id, lim)
	if len(own) == len(join) {
		err = j.Layout.Create(rel)
	} else if err = j.Layout.Create(j.Parent); err == nil {
		for _, d := range own {
			if err = os.MkdirAll(d, 0o755); err != nil {
				break
			}
		}
		// A group of its own from an earlier copy with a quota would
		// hold what CPURel names: the job shares the node's now.
		_ = syscall.Rmdir(filepath.Join(j.Layout.CPU, rel))
	}
	if err == nil {
		j.limitAll()
		err = j.setLimits(rel, lim)
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
	for _, d := range join {
		procs = append(procs, filepath.Join(d, "cgroup.procs"))
	}
	return procs, release, nil
}

// groups are job id's group directories, one a controller: those its
// process joins, the CPU controller's first, and of those the ones made
// for the job alone (all of them, but under v1 for a job without a CPU
// quota, which joins Parent's CPU group: see Enter).
func (j *Jobs) groups(id string, lim Limits) (join, own []string) {
	join = j.Layout.Dirs(j.Rel(id))
	if j.Layout.V2 || lim.CPUQuotaUS > 0 {
		return join, join
	}
	join[0] = filepath.Join(j.Layout.CPU, j.Parent)
	return join, join[1:]
}

// Steps are what a new job's groups cost the kernel, as Enter and Tidy
// take them for a job of limits lim whose Parent/jobs exists: the
// directories made for it alone (and removed once it ended), the limits
// written in order, and the cgroup.procs files its process joins. The
// job-start benchmark's local loop takes these steps for each of its
// jobs, so that it does the cgroup work a job does.
type Steps struct {
	Make   []string
	Writes []Write
	Join   []string
}

// Write is one limit written into a job's group: Value into Path; Try,
// when the write may fail and is not an error (see setLimits).
type Write struct {
	Path, Value string
	Try         bool
}

// Steps is job id's Steps for limits lim.
func (j *Jobs) Steps(id string, lim Limits) (Steps, error) {
	if err := validName(id); err != nil {
		return Steps{}, err
	}
	join, own := j.groups(id, lim)
	s := Steps{Make: own, Writes: j.limitWrites(j.Rel(id), lim)}
	for _, d := range join {
		s.Join = append(s.Join, filepath.Join(d, "cgroup.procs"))
	}
	return s, nil
}

// CPURel is the CPU group a job of this node runs in: its own under v2,
// and under v1 when it has a quota, else Parent (see Enter).
func (j *Jobs) CPURel(id string) string {
	if j.Layout.V2 {
		return j.Rel(id)
	}
	if validName(id) == nil && j.Layout.Exists(j.Rel(id)) {
		return j.Rel(id)
	}
	return j.Parent
}

// limitAll gives Parent/jobs its memory limit, once (j.mu held). Best
// effort: a limit below what running jobs hold already is refused, and
// the node's own limits still bound them.
func (j *Jobs) limitAll() {
	if j.Memory <= 0 || j.limited {
		return
	}
	name := "memory.limit_in_bytes"
	if j.Layout.V2 {
		name = "memory.max"
	}
	j.limited = write(filepath.Join(j.Layout.Memory, j.Parent, "jobs", name), strconv.FormatInt(j.Memory, 10)) == nil
}

// setLimits writes lim into the job's group rel (limitWrites).
func (j *Jobs) setLimits(rel string, lim Limits) error {
	for _, w := range j.limitWrites(rel, lim) {
		if err := write(w.Path, w.Value); err != nil && !w.Try {
			return err
		}
	}
	return nil
}

// limitWrites are the writes that give the job's group rel lim: each
// limit, or none ("max", -1) where lim has none, so that a group made
// for an earlier copy keeps nothing of its limits.
func (j *Jobs) limitWrites(rel string, lim Limits) []Write {
	l := j.Layout
	mem, pids, quota := "max", "max", "max"
	if !l.V2 {
		mem, quota = "-1", "-1"
	}
	if lim.MemBytes > 0 {
		mem = strconv.FormatInt(lim.MemBytes, 10)
	}
	if lim.Pids > 0 {
		pids = strconv.FormatInt(lim.Pids, 10)
	}
	if lim.CPUQuotaUS > 0 {
		quota = strconv.FormatInt(lim.CPUQuotaUS, 10)
	}
	memDir, cpuDir := filepath.Join(l.Memory, rel), filepath.Join(l.CPU, rel)
	var ws []Write
	// Swap is limited where the host counts it: the file is in every
	// group below the root then, Parent/jobs (which Enter made) too.
	swap := "memory.memsw.limit_in_bytes"
	if l.V2 {
		swap = "memory.swap.max"
	}
	_, err := os.Stat(filepath.Join(l.Memory, j.Parent, "jobs", swap))
	swapped := err == nil
	if l.V2 {
		ws = append(ws, Write{Path: filepath.Join(memDir, "memory.max"), Value: mem})
		if swapped {
			ws = append(ws, Write{Path: filepath.Join(memDir, swap), Value: swapOff(mem)})
		}
		ws = append(ws, Write{Path: filepath.Join(cpuDir, "cpu.max"), Value: quota + " " + strconv.Itoa(CFSPeriodUS)})
	} else {
		// memsw (memory and swap together) may never be below the
		// memory limit: it is written before the memory limit (which a
		// raise needs, and a cut refuses) and after it (which a cut
		// needs).
		sw := Write{Path: filepath.Join(memDir, swap), Value: mem}
		if swapped {
			ws = append(ws, Write{Path: sw.Path, Value: mem, Try: true})
		}
		ws = append(ws, Write{Path: filepath.Join(memDir, "memory.limit_in_bytes"), Value: mem})
		if swapped {
			ws = append(ws, sw)
		}
		if lim.CPUQuotaUS > 0 {
			ws = append(ws, Write{Path: filepath.Join(cpuDir, "cpu.cfs_period_us"), Value: strconv.Itoa(CFSPeriodUS)},
				Write{Path: filepath.Join(cpuDir, "cpu.cfs_quota_us"), Value: quota})
		}
	}
	if l.Pids != "" {
		ws = append(ws, Write{Path: filepath.Join(l.Pids, rel, "pids.max"), Value: pids})
	}
	return ws
}

// swapOff is v2's swap limit for memory limit mem: none where memory is
// limited (as v1's memsw equal to the memory limit), else "max".
func swapOff(mem string) string {
	if mem == "max" {
		return "max"
	}
	return "0"
}

// OOMKills is how many processes of job id the kernel's OOM killer
// killed in its group, as the group counts them (v1's oom_control, v2's
// memory.events); 0 when the group or the count is missing.
func (j *Jobs) OOMKills(id string) int64 {
	if validName(id) != nil {
		return 0
	}
	name := "memory.oom_control"
	if j.Layout.V2 {
		name = "memory.events"
	}
	return readKeyed(filepath.Join(j.Layout.Memory, j.Rel(id), name))["oom_kill"]
}

// Tidy removes the groups of jobs that no longer have a process here
// (ended, or moved to another node), that nobody is entering and that
// keep (nil: none) does not keep: an ended job's group counts what it
// used, and its OOM kills, until its home has them (job.Processes.Tidy).
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
		if j.busy[id] == 0 && !j.removeIdle(j.Rel(id)) && len(j.Layout.Procs(j.Rel(id))) == 0 {
			_ = j.Layout.Remove(j.Rel(id))
		}
		j.mu.Unlock()
	}
}

// removeIdle removes the job's group rel under every controller, and says
// so, when it holds neither a process nor a group: the kernel refuses to
// remove a group that holds either, and tells so without anyone reading
// the group's processes first. The memory group goes first: every process
// of a job joins it before any other, and the CPU group last (roam-init),
// so that a group whose memory group held a process is left whole. A
// group that holds a group of its own is left to Procs and Remove.
func (j *Jobs) removeIdle(rel string) bool {
	mem, cpu := filepath.Join(j.Layout.Memory, rel), filepath.Join(j.Layout.CPU, rel)
	order := []string{mem}
	for _, d := range j.Layout.Dirs(rel) {
		if d != mem && d != cpu {
			order = append(order, d)
		}
	}
	if cpu != mem {
		order = append(order, cpu)
	}
	for _, d := range order {
		if err := syscall.Rmdir(d); err != nil && err != syscall.ENOENT {
			return false
		}
	}
	return true
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
