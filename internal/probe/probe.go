// Package probe measures a node: how many threads are runnable in the node's
// cgroup (or on the whole host when the node is a real machine), and how much
// memory is free to it. It reads /proc and cgroup files and nothing else; it
// decides nothing.
package probe

import (
	"bufio"
	"os"
	"strconv"
	"strings"

	"roam/internal/cgroup"
	"roam/internal/procfs"
)

// Node probes one node. Group is the node's cgroup relative to the
// controllers' mount points; empty means the whole host.
type Node struct {
	Layout cgroup.Layout
	Group  string
}

// Runnable returns the number of runnable threads right now, leaving out
// the processes in skip (pid to its start time in ticks after boot, so
// that a pid reused by another process still counts). The agent passes
// its jobs' roam-init processes, which only wait for their children. A
// roam-init just restored or just started is runnable until it is given
// a CPU to return to its wait, and in a node whose CPU share its job has
// used up (CFS throttles the group) it stays so for up to a period:
// counted, it made a node with three jobs refuse a fourth as if it ran
// four. A thread that CFS throttles is still runnable otherwise: it wants
// a CPU it is not given, which is exactly what makes a slow node count as
// loaded.
//
// On a whole host (no group), procs_running less the probe itself is
// counted, less the skipped processes that are runnable: roam's jobs group
// there has no CPU quota, so a runnable init is one procs_running counts.
func (n Node) Runnable(skip map[int]uint64) int {
	if n.Group == "" {
		// procs_running counts this probe itself.
		return max(hostProcsRunning()-1-runnableOf(skip), 0)
	}
	tids, err := n.Layout.Threads(n.Group)
	if err != nil {
		return 0
	}
	return countRunnable(tids, skip)
}

// countRunnable counts the threads of tids in state R, those in skip (with
// the same start time) left out.
func countRunnable(tids []int, skip map[int]uint64) int {
	count := 0
	for _, tid := range tids {
		st, err := procfs.ReadStat(tid)
		if err != nil || st.State != 'R' {
			continue
		}
		if start, ok := skip[tid]; ok && start == st.StartTime {
			continue
		}
		count++
	}
	return count
}

// runnableOf counts the processes of skip that run (state R) and are the
// ones skip names (same start time).
func runnableOf(skip map[int]uint64) int {
	count := 0
	for pid, start := range skip {
		if st, err := procfs.ReadStat(pid); err == nil && st.State == 'R' && st.StartTime == start {
			count++
		}
	}
	return count
}

// MemFreeMB returns the memory still free to the node: the cgroup's limit
// less its use when it has a limit, and never more than the host has
// available.
func (n Node) MemFreeMB() float64 {
	host := hostMemAvailableMB()
	if n.Group == "" {
		return host
	}
	if lim := n.Layout.MemoryLimitMB(n.Group); lim > 0 {
		return max(min(lim-n.Layout.MemoryUsageMB(n.Group), host), 0)
	}
	return host
}

// HostReserve is the share of a real host's memory its jobs are not
// given when the config names no jobs.memory_bytes: the system, the
// agent, CRIU's dumps and the page cache's least.
const HostReserve = 0.10

// JobMemory is the memory, in bytes, the node gives its jobs when the
// config names none (jobs.memory_bytes 0): its cgroup's limit on an
// emulated node, where the agent runs outside it, else the host's memory
// less HostReserve.
func (n Node) JobMemory() int64 {
	if n.Group != "" {
		if lim := n.Layout.MemoryLimitMB(n.Group); lim > 0 {
			return int64(lim * (1 << 20))
		}
	}
	total := int64(scanField("/proc/meminfo", "MemTotal:")) << 10
	return int64(float64(total) * (1 - HostReserve))
}

func hostProcsRunning() int {
	return scanField("/proc/stat", "procs_running")
}

func hostMemAvailableMB() float64 {
	return float64(scanField("/proc/meminfo", "MemAvailable:")) / 1024
}

// scanField returns the integer after the first line starting with key.
func scanField(path, key string) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) >= 2 && fs[0] == key {
			v, _ := strconv.Atoi(fs[1])
			return v
		}
	}
	return 0
}
