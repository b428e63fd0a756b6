package emu

import "roam/internal/procfs"

// started is a process an agent started, known by its pid and start time,
// so that a pid the kernel gave again to another process is not signalled.
type started struct {
	pid   int
	start uint64
}

// agentsStarted lists what the agents started that still runs: CRIU's
// workers and page servers, restores' roam-inits, jobs. An agent stopped
// while CRIU dumps or serves pages leaves that CRIU running outside every
// cgroup of the cluster, reparented away from the agent, where the kill of
// the cluster's groups does not reach it (a dump cut off by a cluster's
// down was found alive 28 minutes later).
func agentsStarted(agents []int) []started {
	var out []started
	for _, a := range agents {
		for _, p := range procfs.Tree(a) {
			if p == a {
				continue
			}
			if st, err := procfs.ReadStat(p); err == nil {
				out = append(out, started{pid: p, start: st.StartTime})
			}
		}
	}
	return out
}

// stillRunning are the processes of ps that still run as themselves.
func stillRunning(ps []started) []int {
	var out []int
	for _, p := range ps {
		if st, err := procfs.ReadStat(p.pid); err == nil && st.StartTime == p.start && st.State != 'Z' {
			out = append(out, p.pid)
		}
	}
	return out
}
