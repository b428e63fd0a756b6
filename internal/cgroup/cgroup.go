// Package cgroup creates, limits, lists and removes the control groups that
// give an emulated node its CPU share and memory limit. It detects whether the
// host offers the cpu and memory controllers through cgroup v2 or v1 (this
// kind of machine has v1 controllers and a v2 mount without them) rather than
// assuming either.
//
// It touches only cgroup files; it starts and stops no process.
package cgroup

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// CFSPeriodUS is the CFS period used for CPU quotas: 100 ms, the kernel's
// default, so a quota of 25 ms means a quarter of a core.
const CFSPeriodUS = 100000

// Layout says where the controllers roam uses are mounted.
type Layout struct {
	V2     bool
	CPU    string // mount point of the cpu controller (v1) or the v2 root
	Memory string // mount point of the memory controller (v1) or the v2 root
	// CPUAcct is the mount point of the cpuacct controller (v1), which
	// counts a group's CPU time; "" under v2 (cpu.stat counts it) or when
	// the host has none.
	CPUAcct string
	// Pids is the mount point of the pids controller (v1), or the v2
	// root when it offers the controller; "" when the host has none
	// (a job's processes are then not bounded).
	Pids string
}

// ErrNoController means the host has no usable cpu or memory controller.
var ErrNoController = errors.New("cgroup: no usable cpu and memory controllers")

// Detect reads /proc/mounts and picks v2 when its root offers both the cpu
// and memory controllers, else v1 when both are mounted.
func Detect() (Layout, error) {
	f, err := os.Open("/proc/mounts")
	if err != nil {
		return Layout{}, err
	}
	defer f.Close()
	var l1 Layout
	var v2root string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Split(sc.Text(), " ") // one space between fields: a path may hold other white space
		if len(fs) < 4 {
			continue
		}
		switch fs[2] {
		case "cgroup2":
			if v2root == "" {
				v2root = fs[1]
			}
		case "cgroup":
			for _, o := range strings.Split(fs[3], ",") {
				switch o {
				case "cpu":
					l1.CPU = fs[1]
				case "memory":
					l1.Memory = fs[1]
				case "cpuacct":
					l1.CPUAcct = fs[1]
				case "pids":
					l1.Pids = fs[1]
				}
			}
		}
	}
	if v2root != "" {
		b, _ := os.ReadFile(filepath.Join(v2root, "cgroup.controllers"))
		c := " " + strings.TrimSpace(string(b)) + " "
		if strings.Contains(c, " cpu ") && strings.Contains(c, " memory ") {
			l := Layout{V2: true, CPU: v2root, Memory: v2root}
			if strings.Contains(c, " pids ") {
				l.Pids = v2root
			}
			return l, nil
		}
	}
	if l1.CPU != "" && l1.Memory != "" {
		return l1, nil
	}
	return Layout{}, ErrNoController
}

// String names the layout for logs and `roam cluster status`.
func (l Layout) String() string {
	if l.V2 {
		return "cgroup v2 at " + l.CPU
	}
	return fmt.Sprintf("cgroup v1 (cpu at %s, memory at %s)", l.CPU, l.Memory)
}

// Dirs returns the group's directory under each controller roam uses.
func (l Layout) Dirs(rel string) []string {
	if l.V2 {
		return []string{filepath.Join(l.CPU, rel)}
	}
	ds := []string{filepath.Join(l.CPU, rel), filepath.Join(l.Memory, rel)}
	for _, m := range []string{l.CPUAcct, l.Pids} {
		if m != "" && m != l.CPU && m != l.Memory {
			ds = append(ds, filepath.Join(m, rel))
		}
	}
	return ds
}

// Create makes the group rel (e.g. "roam/c1/n2") under every controller,
// with its parents. On v2 it enables cpu and memory (and pids, where the
// root offers it) for the children of each parent on the way.
func (l Layout) Create(rel string) error {
	if l.V2 {
		parts := strings.Split(filepath.Clean(rel), "/")
		dir := l.CPU
		for _, p := range parts {
			ctl := "+cpu +memory"
			if l.Pids != "" {
				ctl += " +pids"
			}
			_ = os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(ctl), 0)
			dir = filepath.Join(dir, p)
			if err := os.Mkdir(dir, 0o755); err != nil && !os.IsExist(err) {
				return fmt.Errorf("cgroup %s: %w", dir, err)
			}
		}
		return nil
	}
	for _, m := range l.Dirs("") {
		if _, err := os.Stat(filepath.Join(m, "cgroup.procs")); err != nil {
			return fmt.Errorf("cgroup %s: no controller mounted there: %w", m, err)
		}
	}
	for _, d := range l.Dirs(rel) {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("cgroup %s: %w", d, err)
		}
	}
	return nil
}

// SetCPU limits the group to cores CPUs (e.g. 0.25) with a CFS quota.
func (l Layout) SetCPU(rel string, cores float64) error {
	quota := int64(cores * CFSPeriodUS)
	if l.V2 {
		return write(filepath.Join(l.CPU, rel, "cpu.max"), fmt.Sprintf("%d %d", quota, CFSPeriodUS))
	}
	d := filepath.Join(l.CPU, rel)
	if err := write(filepath.Join(d, "cpu.cfs_period_us"), strconv.Itoa(CFSPeriodUS)); err != nil {
		return err
	}
	return write(filepath.Join(d, "cpu.cfs_quota_us"), strconv.FormatInt(quota, 10))
}

// Throttler is the highest CPU group at or above rel, below the
// controller's root, that a CFS quota limits: the group whose quota rel's
// processes share. It is "" when none does, and under v2.
func (l Layout) Throttler(rel string) string {
	if l.V2 {
		return ""
	}
	top := ""
	for d := filepath.Clean(rel); d != "." && d != "/" && d != ""; d = filepath.Dir(d) {
		b, err := os.ReadFile(filepath.Join(l.CPU, d, "cpu.cfs_quota_us"))
		if q, err2 := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && err2 == nil && q > 0 {
			top = d
		}
	}
	return top
}

// SetMemory limits the group's memory to mb MiB.
func (l Layout) SetMemory(rel string, mb int) error {
	b := strconv.FormatInt(int64(mb)<<20, 10)
	if l.V2 {
		return write(filepath.Join(l.Memory, rel, "memory.max"), b)
	}
	return write(filepath.Join(l.Memory, rel, "memory.limit_in_bytes"), b)
}

// MemoryLimitMB returns the group's memory limit, or 0 when it has none.
func (l Layout) MemoryLimitMB(rel string) float64 {
	name := "memory.limit_in_bytes"
	if l.V2 {
		name = "memory.max"
	}
	v, err := readInt(filepath.Join(l.Memory, rel, name))
	if err != nil || v <= 0 || v >= 1<<60 {
		return 0
	}
	return float64(v) / (1 << 20)
}

// MemoryUsageMB returns the group's current memory use.
func (l Layout) MemoryUsageMB(rel string) float64 {
	name := "memory.usage_in_bytes"
	if l.V2 {
		name = "memory.current"
	}
	v, _ := readInt(filepath.Join(l.Memory, rel, name))
	return float64(v) / (1 << 20)
}

// AddProc moves pid into the group under every controller.
func (l Layout) AddProc(rel string, pid int) error {
	for _, d := range l.Dirs(rel) {
		if err := write(filepath.Join(d, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return err
		}
	}
	return nil
}

// AddCPUProc moves pid into the group's CPU cgroup only (v1).
func (l Layout) AddCPUProc(rel string, pid int) error {
	return write(filepath.Join(l.CPU, rel, "cgroup.procs"), strconv.Itoa(pid))
}

// Threads lists the thread ids in the group and every group below it (cpu
// controller), the unit the scheduler runs.
func (l Layout) Threads(rel string) ([]int, error) {
	name := "tasks"
	if l.V2 {
		name = "cgroup.threads"
	}
	return treeInts(filepath.Join(l.CPU, rel), name)
}

// Procs lists the process ids in the group and every group below it,
// under every controller (a starting job joins its CPU group last), each
// once.
func (l Layout) Procs(rel string) []int {
	var out []int
	seen := map[int]bool{}
	for _, d := range l.Dirs(rel) {
		ps, _ := treeInts(d, "cgroup.procs")
		for _, p := range ps {
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return out
}

// treeInts reads the ids in file name of the group at dir and of every
// group below it; an error when dir itself cannot be read.
func treeInts(dir, name string) ([]int, error) {
	var out []int
	err := filepath.WalkDir(dir, func(p string, de os.DirEntry, err error) error {
		if err != nil {
			if p == dir {
				return err
			}
			return nil // a group removed while we walk
		}
		if de.IsDir() {
			ids, err := readInts(filepath.Join(p, name))
			if err != nil && p == dir {
				return err
			}
			out = append(out, ids...)
		}
		return nil
	})
	return out, err
}

// Exists reports whether the group exists under the cpu controller.
func (l Layout) Exists(rel string) bool {
	_, err := os.Stat(filepath.Join(l.CPU, rel))
	return err == nil
}

// Remove deletes rel and every group below it, deepest first, under every
// controller. A group that still has processes cannot be removed: the caller
// kills them first. Missing groups are not an error.
func (l Layout) Remove(rel string) error {
	var firstErr error
	for _, d := range l.Dirs(rel) {
		if err := RemoveTree(d); err != nil && firstErr == nil {
			firstErr = err
		}
	}
	return firstErr
}

// RemoveTree deletes the group at dir and every group below it, deepest
// first, in a hierarchy that need not be roam's own (Slurm's, say). A
// missing dir is not an error.
func RemoveTree(dir string) error {
	var dirs []string
	_ = filepath.WalkDir(dir, func(p string, de os.DirEntry, err error) error {
		if err == nil && de.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	var firstErr error
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := rmdirRetry(dirs[i]); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("remove cgroup %s: %w", dirs[i], err)
		}
	}
	return firstErr
}

// TreeProcs are the processes in the group at dir and in every group below
// it; none when dir cannot be read.
func TreeProcs(dir string) []int {
	ps, _ := treeInts(dir, "cgroup.procs")
	return ps
}

// rmdirRetry removes a cgroup directory; EBUSY right after its last process
// died is normal for a few milliseconds while the kernel tears it down.
func rmdirRetry(dir string) error {
	var err error
	for i := 0; i < 50; i++ {
		err = syscall.Rmdir(dir)
		if err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) {
			return err
		}
		time.Sleep(20 * time.Millisecond)
	}
	return err
}

func write(path, v string) error {
	if err := os.WriteFile(path, []byte(v), 0); err != nil {
		return fmt.Errorf("cgroup: write %s: %w", path, err)
	}
	return nil
}

func readInt(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	if s == "max" {
		return 0, nil
	}
	return strconv.ParseInt(s, 10, 64)
}

func readInts(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []int
	for _, f := range strings.Fields(string(b)) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out, nil
}

// FavorDynMods says whether a cgroup hierarchy of this mount namespace is
// mounted with favordynmods (in mountinfo, a mount's super options). The
// kernel then moves a task between groups without waiting for an RCU grace
// period (10-20 ms here), and forks and exits cost a little more: a
// migration's restore moves the job into its groups while it is stopped.
// The lock is the kernel's, one for all hierarchies, so one mount with the
// option is enough.
func FavorDynMods(mountinfo string) bool {
	for _, l := range strings.Split(mountinfo, "\n") {
		_, after, ok := strings.Cut(l, " - ")
		g := strings.Split(after, " ")
		if ok && len(g) >= 3 && (g[0] == "cgroup" || g[0] == "cgroup2") {
			for _, o := range strings.Split(g[2], ",") {
				if o == "favordynmods" {
					return true
				}
			}
		}
	}
	return false
}
