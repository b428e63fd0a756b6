package main

import (
	"context"
	"os"
	"strconv"
	"time"

	"roam/internal/agent/launch"
	"roam/internal/cgroup"
	"roam/internal/slurm"
	"roam/internal/slurm/scontrol"
)

// slurmAskTimeout bounds one question to Slurm's controller: a run waits
// that long at most before it is refused.
const slurmAskTimeout = 10 * time.Second

// slurmControllers are the v1 hierarchies of a job's extern step that a
// job of roam's joins: the freezer's, by which Slurm's proctrack/cgroup
// finds and ends the job's processes (required), and memory's and
// cpuacct's, by which its task plugin limits and its accounting counts
// them (joined where Slurm made them).
var slurmControllers = []string{"freezer", "memory", "cpuacct"}

// slurmGroups are the cgroup.procs files of a Slurm job's extern step on
// this node (job.Launcher.SlurmGroups).
func slurmGroups(layout cgroup.Layout, c slurm.Config) func(uid uint32, job string) ([]string, error) {
	return func(uid uint32, job string) ([]string, error) {
		rel := slurm.ExternDir(c.CgroupOrDefault(), int(uid), job)
		out, err := layout.ProcsFiles(rel, slurmControllers[:1])
		if err != nil || layout.V2 {
			return out, err
		}
		for _, ctl := range slurmControllers[1:] {
			if more, err := layout.ProcsFiles(rel, []string{ctl}); err == nil {
				out = append(out, more...)
			}
		}
		return out, nil
	}
}

// slurmRoots are the groups of a Slurm job's extern step on this node, by
// controller, as CRIU's cgroup roots take them (ckpt.Host.SlurmRoots): a
// job restored here joins the same ones a start joins (slurmGroups).
func slurmRoots(layout cgroup.Layout, c slurm.Config) func(uid uint32, job string) (map[string]string, error) {
	return func(uid uint32, job string) (map[string]string, error) {
		rel := slurm.ExternDir(c.CgroupOrDefault(), int(uid), job)
		if _, err := layout.ProcsFiles(rel, slurmControllers[:1]); err != nil {
			return nil, err
		}
		if layout.V2 {
			return map[string]string{"": "/" + rel}, nil
		}
		out := map[string]string{}
		for _, ctl := range slurmControllers {
			if _, err := layout.ProcsFiles(rel, []string{ctl}); err == nil {
				out[ctl] = "/" + rel
			}
		}
		return out, nil
	}
}

// slurmAsk reads the caller's Slurm job from its cgroup and asks the
// controller about the job it names (launch.SlurmAsk).
func slurmAsk(c slurm.Config) launch.SlurmAsk {
	return func(pid int32, id string) (string, slurm.Job, error) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/cgroup")
		if err != nil {
			return "", slurm.Job{}, err
		}
		_, callerJob, _ := slurm.JobOfCgroup(string(b))
		ctx, cancel := context.WithTimeout(context.Background(), slurmAskTimeout)
		defer cancel()
		j, err := scontrol.Show(ctx, c.Scontrol, c.Conf, id)
		return callerJob, j, err
	}
}
