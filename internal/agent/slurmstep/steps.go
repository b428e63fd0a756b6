package slurmstep

import (
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"roam/internal/ckpt"
	"roam/internal/job"
	"roam/internal/slurm"
	"roam/internal/slurm/stepd"
)

// Steps tells the extern step of a Slurm job on this node of each
// process of the job that starts or is restored here (stepd.Client).
//
// Each such process joined the step's groups on this node before its
// program ran (externGroups): its cpuacct and memory groups are those of
// the step's own task here, which Slurm's jobacct_gather/cgroup reads for
// the step. The step is not asked to adopt it then: Slurm 22.05 counts a
// step's adopted processes each with the whole task group's count at its
// last poll, and adds those up as they end, which counts the group again
// for every one. It is asked only for a process that is in no task
// group (another accounting plugin, one that counts by process).
//
// When the last of the job's processes here ends, the step is asked to
// read its count (stepd.Client.Poll): Slurm reads it every
// JobAcctGatherFrequency, not at the job's end, and without that last
// read what they used since the previous one is not counted. Not at each
// end: a step's stat reads every process of the step once for each, and
// took 0.6 s for 60 of them on a loaded machine.
type Steps struct {
	step stepd.Client
	log  *slog.Logger
	mu   *sync.Mutex
	live map[string]int // Slurm job: its processes running here
}

// New serves the Slurm jobs of node nodeID as c configures it, logging
// to log.
func New(c slurm.Config, nodeID string, log *slog.Logger) *Steps {
	name := c.NodeName(nodeID)
	return &Steps{step: stepd.Client{Spool: c.SpoolDir(name), Node: name, Owners: stepd.Owners(), Timeout: StepTimeout},
		log: log, mu: &sync.Mutex{}, live: map[string]int{}}
}

// StepTimeout bounds one question to a step; the agent waits for it
// on a goroutine of its own, never while starting or restoring a job. It
// is short: a step that ends waits for the connections to it (up to 3 s,
// Slurm's STEPD_MESSAGE_COMP_WAIT) before it leaves its groups.
const StepTimeout = 3 * time.Second

// Processes is p, telling s of each process it starts (p itself for nil).
func (s *Steps) Processes(p job.Processes) job.Processes {
	if s == nil {
		return p
	}
	return slurmProcesses{p, s}
}

// Checkpointer is c, telling s of each process it restores (c itself for
// nil).
func (s *Steps) Checkpointer(c ckpt.Checkpointer) ckpt.Checkpointer {
	if s == nil {
		return c
	}
	return slurmCheckpointer{c, s}
}

// started is called once a Slurm job's process (roam-init at pid) runs on
// this node. It must not block: the step is asked, and the process
// watched, on a goroutine of its own.
func (s *Steps) started(slurmJob string, pid int) {
	s.mu.Lock()
	s.live[slurmJob]++
	s.mu.Unlock()
	go func() {
		if !inStepTask(pid) {
			if err := s.step.Adopt(slurmJob, pid); err != nil {
				s.log.Warn("Slurm's extern step did not adopt a process of its job: sacct may not count it", "pid", pid, "err", err)
			}
		}
		waitExit(pid)
		s.mu.Lock()
		s.live[slurmJob]--
		last := s.live[slurmJob] == 0
		if last {
			delete(s.live, slurmJob)
		}
		s.mu.Unlock()
		if !last {
			return
		}
		if err := s.step.Poll(slurmJob); err != nil {
			// The job's own end ends its step first: nothing to read.
			s.log.Debug("Slurm's extern step not polled", "slurm_job", slurmJob, "err", err)
		}
	}()
}

// inStepTask says whether process pid is in its Slurm step's task group
// on this node, which Slurm's jobacct_gather/cgroup reads (slurm.InStepTask).
func inStepTask(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	return err == nil && slurm.InStepTask(string(b))
}

// waitExit returns once process pid has ended (at once if it is gone):
// its pidfd turns readable then, whoever its parent is.
func waitExit(pid int) {
	fd, err := unix.PidfdOpen(pid, unix.PIDFD_NONBLOCK)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	defer f.Close()
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Read(func(fd uintptr) bool {
		p := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(p, 0)
		return n > 0 || (err != nil && err != unix.EINTR)
	})
}

// slurmProcesses starts jobs as its Processes does, and tells the Slurm
// job's extern step of each that serves one.
type slurmProcesses struct {
	job.Processes
	steps *Steps
}

func (p slurmProcesses) Start(s job.Spec) (*job.Proc, error) {
	proc, err := p.Processes.Start(s)
	if err == nil && s.Slurm != "" {
		p.steps.started(s.Slurm, proc.PID)
	}
	return proc, err
}

// slurmCheckpointer restores jobs as its Checkpointer does, and tells the
// Slurm job's extern step here of each restored one that serves one.
type slurmCheckpointer struct {
	ckpt.Checkpointer
	steps *Steps
}

func (c slurmCheckpointer) Restore(spec ckpt.RestoreSpec) (int, ckpt.Times, error) {
	pid, t, err := c.Checkpointer.Restore(spec)
	if err == nil && spec.Slurm != "" {
		c.steps.started(spec.Slurm, pid)
	}
	return pid, t, err
}
