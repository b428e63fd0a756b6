package limits

import (
	"fmt"
	"math"

	"roam/internal/resources"
)

// Jobs is what each job gets on this node (the config's jobs: section):
// the requests of a `roam run` that gives none, the processes one job
// may have, and the memory this node admits jobs' requests up to.
type Jobs struct {
	// DefaultCPUs is --cpus for a run at this home that gives none: one
	// CPU, a serial program's (Slurm's --cpus-per-task). Its cgroup's CPU
	// quota, where that is less than the node has, the thread variables
	// of its environment, and the slots it counts follow from it.
	DefaultCPUs float64 `yaml:"default_cpus"`
	// DefaultMemBytes is --mem for a run at this home that gives none;
	// 0: none. A job without a memory request counts nothing toward a
	// node's memory for jobs and has no limit of its own: all the node's
	// jobs together are bounded by MemoryBytes.
	DefaultMemBytes int64 `yaml:"default_mem_bytes"`
	// Pids bounds the processes and threads of one job (its cgroup's
	// pids.max) on this node: a fork bomb stops there, and the node's
	// other jobs and the agent go on.
	Pids int64 `yaml:"pids"`
	// MemoryBytes is the memory this node gives its jobs: it takes a job
	// (a start, a move, a restart) only while the memory requests of the
	// jobs it holds and this one's fit in it, and all its jobs together
	// are limited to it (the jobs' parent cgroup). 0: the node's cgroup's
	// memory limit on an emulated node, else the host's memory less a
	// tenth (probe.JobMemory).
	MemoryBytes int64 `yaml:"memory_bytes"`
}

// DefaultJobs are the jobs: section of a node whose config says nothing.
func DefaultJobs() Jobs {
	return Jobs{DefaultCPUs: 1, Pids: DefaultJobPids}
}

// DefaultJobPids is jobs.pids when the config sets none: four times the
// threads of an OpenMP job on a 1,024-core machine, far below the host's
// pid_max (4 million), so that a fork bomb in one job leaves pids for
// every other.
const DefaultJobPids = 4096

// Validate names the first key of the jobs: section out of range.
func (j Jobs) Validate() (string, error) {
	_, cpusOK := milliCPUs(j.DefaultCPUs)
	switch {
	case !cpusOK:
		return "jobs.default_cpus", fmt.Errorf("%v is not a number of CPUs from %s to %s with at most three decimals",
			j.DefaultCPUs, resources.FormatCPUs(resources.MinMilliCPUs), resources.FormatCPUs(resources.MaxMilliCPUs))
	case (resources.Request{MemBytes: j.DefaultMemBytes}).Check() != nil:
		return "jobs.default_mem_bytes", fmt.Errorf("%d is out of range (0, or %d to %d)", j.DefaultMemBytes, int64(resources.MinMemBytes), int64(resources.MaxMemBytes))
	case j.Pids < 16 || j.Pids > 1<<22:
		return "jobs.pids", fmt.Errorf("%d is out of range (16 to 4194304)", j.Pids)
	case (resources.Request{MemBytes: j.MemoryBytes}).Check() != nil:
		return "jobs.memory_bytes", fmt.Errorf("%d is out of range (0, or %d to %d)", j.MemoryBytes, int64(resources.MinMemBytes), int64(resources.MaxMemBytes))
	case j.MemoryBytes != 0 && j.DefaultMemBytes > j.MemoryBytes:
		return "jobs.default_mem_bytes", fmt.Errorf("%d is more than jobs.memory_bytes (%d): no job of it would fit", j.DefaultMemBytes, j.MemoryBytes)
	}
	return "", nil
}

// milliCPUs is a number of CPUs in thousandths, and whether it is one
// --cpus allows: within bounds, with at most three decimals.
func milliCPUs(cpus float64) (int64, bool) {
	m := math.Round(cpus * resources.MilliPerCPU)
	ok := !math.IsNaN(cpus) && !math.IsInf(cpus, 0) && math.Abs(m-cpus*resources.MilliPerCPU) <= 1e-6 &&
		m >= resources.MinMilliCPUs && m <= resources.MaxMilliCPUs
	return int64(m), ok
}

// DefaultRequest is the request of a run that gives none (j is valid).
func (j Jobs) DefaultRequest() resources.Request {
	m, _ := milliCPUs(j.DefaultCPUs)
	return resources.Request{MilliCPUs: m, MemBytes: j.DefaultMemBytes}
}

// Request is a run's request from its --cpus (a number of CPUs, 0: none
// given) and --mem (bytes, 0: none given), with what it leaves out taken
// from def; an error names the flag.
func Request(cpus float64, memBytes int64, def resources.Request) (resources.Request, error) {
	r := def
	if cpus != 0 {
		m, ok := milliCPUs(cpus)
		if !ok {
			return resources.Request{}, fmt.Errorf("--cpus %v is not a number of CPUs from %s to %s with at most three decimals",
				cpus, resources.FormatCPUs(resources.MinMilliCPUs), resources.FormatCPUs(resources.MaxMilliCPUs))
		}
		r.MilliCPUs = m
	}
	if memBytes != 0 {
		r.MemBytes = memBytes
	}
	if err := r.Check(); err != nil {
		return resources.Request{}, err
	}
	return r, nil
}
