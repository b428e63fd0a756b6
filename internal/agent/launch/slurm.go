package launch

import (
	"errors"
	"maps"
	"slices"

	"roam/internal/agent/httpx"
	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/slurm"
)

// SlurmAsk is what the agent learns of a run's Slurm job (package slurm's
// doc): the job whose group the caller's process (pid) is in on this node
// ("" in none; pid 0: no process is asked after), and what the
// controller says of job id. It runs scontrol; it must not hold a lock of
// the agent's.
type SlurmAsk func(pid int32, id string) (callerJob string, j slurm.Job, err error)

// JobsPerCPU is how many of a sweep's jobs run at once inside a Slurm
// allocation for each CPU the job holds, unless the run says how many
// (--max-running); the others wait in the home's queue, first come first
// served, and start on the allocation's nodes as the running ones end. A
// fluid model of a sweep of 48 jobs of heavy-tailed lengths (Pareto 1.1,
// 0.2 to 8 CPU-s) on 4 CPUs, one of them shared with a load that comes and
// goes, gave 3 a CPU 0.83 of a job array's mean slowdown whatever the
// load (1 a CPU, as the array runs: 1.03 to 1.07; all at once: 0.88 to
// 0.89), with fewer moves than all at once (docs/benchmarks.md,
// slurm-array).
const JobsPerCPU = 3

// inAllocation makes plan p, of run req, one of the Slurm job req names,
// if it names one: placed and moved among the job's nodes only
// (p.within, which its records keep), in the job's extern step on each
// (job.Spec.Slurm). A sweep runs JobsPerCPU jobs at once for each CPU the
// job holds (a node whose count Slurm did not say counts as one), or
// its --max-running; the others are pending in the home's queue, which
// starts them on the job's nodes only (queue.Group.Within). None is
// restarted from a checkpoint on another node.
func (s *Starter) inAllocation(c httpx.Caller, req api.RunRequest, p *plan) error {
	if req.SlurmJob == "" {
		return nil
	}
	switch {
	case req.Rerun != "" || req.CheckpointEvery > 0:
		return errkind.New(peer.ErrBadRequest, "%s: a run inside a Slurm job takes no --rerun nor --checkpoint-every (run with --no-slurm to run outside the job)", slurm.Field)
	case p.spec.Req.MemBytes > 0:
		return errkind.New(peer.ErrBadRequest, "%s: a run inside a Slurm job takes no --mem (Slurm's memory limit holds the job)", slurm.Field)
	}
	within, err := s.Allocation(c, req.SlurmJob)
	if err != nil {
		return err
	}
	p.within, p.spec.Slurm = within, req.SlurmJob
	if n := JobsPerCPU * heldCPUs(within); req.MaxRunning == 0 && n < len(p.jobs) {
		p.part.MaxRunning = n
	}
	return nil
}

// heldCPUs is the CPUs a Slurm job holds on the nodes of within, a node
// whose count is not known counted as one.
func heldCPUs(within map[string]int) int {
	n := 0
	for _, cpus := range within {
		n += max(cpus, 1)
	}
	return n
}

// Allocation checks the Slurm job a run names (its SLURM_JOB_ID) before
// anything of the run is kept, and returns the members it may run on: the
// job's nodes, each with the CPUs the job holds there (nil for a run that
// names none, which goes anywhere). Every refusal is one line naming
// SLURM_JOB_ID.
func (s *Starter) Allocation(c httpx.Caller, id string) (map[string]int, error) {
	if id == "" {
		return nil, nil
	}
	if err := slurm.ValidJobID(id); err != nil {
		return nil, errkind.New(peer.ErrBadRequest, "%v", err)
	}
	if s.cfg.Slurm == nil {
		return nil, errkind.New(peer.ErrBadRequest, "%s: this node serves no Slurm allocations (its slurm.enabled is off): run with --no-slurm to run outside the job", slurm.Field)
	}
	callerJob, j, err := s.cfg.Slurm(c.PID, id)
	if err == nil {
		err = slurm.Check(j, int(c.UID), callerJob, s.cfg.SlurmNode)
	}
	switch {
	case errors.Is(err, slurm.ErrRefused):
		return nil, errkind.New(peer.ErrPermission, "%v", err)
	case err != nil:
		return nil, errkind.New(peer.ErrUnavailable, "%s: job %s: %v", slurm.Field, id, err)
	}
	return s.cfg.Members.SlurmNodes(j), nil
}

// WithinIDs are the nodes of within, sorted (nil for nil): what a job's
// records keep of its allocation.
func WithinIDs(within map[string]int) []string {
	if within == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(within))
}
