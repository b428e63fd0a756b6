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
// the processes in skip: the agent passes its jobs' roam-init processes,
// which only wait for their children. A roam-init just restored or just
// started is runnable until it is given a CPU to return to its wait, and in
// a node whose CPU share its job has used up (CFS throttles the group) it
// stays so for up to a period: counted, it made a node with three jobs
// refuse a fourth as if it ran four. A thread that CFS throttles is still
// runnable otherwise: it wants a CPU it is not given, which is exactly what
// makes a slow node count as loaded.
func (n Node) Runnable(skip map[int]bool) int {
	if n.Group == "" {
		// procs_running counts this probe itself.
		return max(hostProcsRunning()-1-countRunnable(mapKeys(skip), nil), 0)
	}
	tids, err := n.Layout.Threads(n.Group)
	if err != nil {
		return 0
	}
	return countRunnable(tids, skip)
}

// countRunnable counts the threads of tids in state R, those in skip left
// out.
func countRunnable(tids []int, skip map[int]bool) int {
	count := 0
	for _, tid := range tids {
		if !skip[tid] && threadState(tid) == 'R' {
			count++
		}
	}
	return count
}

func mapKeys(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
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

// threadState is the state letter of a thread, or 0 when it is gone.
func threadState(tid int) byte {
	st, err := procfs.ReadStat(tid)
	if err != nil {
		return 0
	}
	return st.State
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
