package main

import (
	"log/slog"
	"os"

	"golang.org/x/sys/unix"

	"roam/internal/ckpt"
	"roam/internal/job"
	"roam/internal/slurm"
	"roam/internal/slurm/stepd"
)

// slurmSteps tells the extern step of a Slurm job on this node of each
// process of the job that starts or is restored here (stepd.Client):
// the step adopts it (Slurm's proctrack, task and jobacct_gather plugins
// take it, as they take an ssh session pam_slurm_adopt hands them), and
// when it ends the step reads its count at once. Slurm's accounting reads
// the step's groups every JobAcctGatherFrequency and not at the job's
// end: without that last read, what the job's processes used since the
// previous one is not counted.
type slurmSteps struct {
	step stepd.Client
	log  *slog.Logger
}

func newSlurmSteps(c slurm.Config, nodeID string, log *slog.Logger) *slurmSteps {
	name := c.NodeName(nodeID)
	return &slurmSteps{step: stepd.Client{Spool: c.SpoolDir(name), Node: name, Owners: stepd.Owners()}, log: log}
}

// processes is p, telling s of each process it starts (p itself for nil).
func (s *slurmSteps) processes(p job.Processes) job.Processes {
	if s == nil {
		return p
	}
	return slurmProcesses{p, *s}
}

// checkpointer is c, telling s of each process it restores (c itself for
// nil).
func (s *slurmSteps) checkpointer(c ckpt.Checkpointer) ckpt.Checkpointer {
	if s == nil {
		return c
	}
	return slurmCheckpointer{c, *s}
}

// started is called once a Slurm job's process (roam-init at pid) runs on
// this node. It must not block: the step is asked, and the process
// watched, on a goroutine of its own.
func (s slurmSteps) started(slurmJob string, pid int) {
	go func() {
		if err := s.step.Adopt(slurmJob, pid); err != nil {
			s.log.Warn("Slurm's extern step did not adopt a process of its job: sacct may not count it", "pid", pid, "err", err)
		}
		waitExit(pid)
		if err := s.step.Poll(slurmJob); err != nil {
			// The job's own end ends its step first: nothing to read.
			s.log.Debug("Slurm's extern step not polled", "pid", pid, "err", err)
		}
	}()
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
	steps slurmSteps
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
	steps slurmSteps
}

func (c slurmCheckpointer) Restore(spec ckpt.RestoreSpec) (int, ckpt.Times, error) {
	pid, t, err := c.Checkpointer.Restore(spec)
	if err == nil && spec.Slurm != "" {
		c.steps.started(spec.Slurm, pid)
	}
	return pid, t, err
}
