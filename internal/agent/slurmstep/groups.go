package slurmstep

import (
	"context"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"roam/internal/agent/launch"
	"roam/internal/cgroup"
	"roam/internal/slurm"
	"roam/internal/slurm/scontrol"
)

// AskTimeout bounds one question to Slurm's controller: a run waits
// that long at most before it is refused.
const AskTimeout = 10 * time.Second

// ExternWait bounds the wait for a job's extern step on this node. Slurm
// makes the step on every node of an allocation as it starts, but a node
// whose CPU is taken may make it seconds after the batch script's roam
// run placed a job there (seen: a node under a background load that held
// its whole CPU quota, where the start was refused and the run with it).
const ExternWait = 5 * time.Second

// externPoll is how often the wait looks for the step's group.
const externPoll = 100 * time.Millisecond

// Controllers are the v1 hierarchies of a job's extern step that a
// job of roam's joins: the freezer's, by which Slurm's proctrack/cgroup
// finds and ends the job's processes (required), and memory's and
// cpuacct's, by which its task plugin limits and its accounting counts
// them (joined where Slurm made them).
var Controllers = []string{"freezer", "memory", "cpuacct"}

// Groups are the cgroup.procs files of a Slurm job's extern step on
// this node (job.Launcher.SlurmGroups).
func Groups(layout cgroup.Layout, c slurm.Config) func(uid uint32, job string) ([]string, error) {
	return func(uid uint32, job string) ([]string, error) {
		rels, err := externGroups(layout, c, uid, job, ExternWait)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, ctl := range Controllers {
			if rel, ok := rels[ctl]; ok {
				files, err := layout.ProcsFiles(rel, []string{ctl})
				if err != nil {
					return nil, err
				}
				out = append(out, files...)
			}
		}
		return out, nil
	}
}

// Roots are the same groups by controller, as CRIU's cgroup roots
// take them (ckpt.Host.SlurmRoots): a job restored here joins the ones a
// start joins.
func Roots(layout cgroup.Layout, c slurm.Config) func(uid uint32, job string) (map[string]string, error) {
	return func(uid uint32, job string) (map[string]string, error) {
		rels, err := externGroups(layout, c, uid, job, ExternWait)
		for ctl, rel := range rels {
			rels[ctl] = "/" + rel
		}
		return rels, err
	}
}

// externGroups are the groups of job's extern step on this node, by
// controller ("" under v2), relative to the mounts: the step's own
// freezer group, which Slurm's proctrack signals, and under memory and
// cpuacct the group of the step's own task here, task_N with N the
// node's index in the job (slurm.ExternTask), where Slurm made one:
// jobacct_gather/cgroup counts a step's tasks' groups, not the step's (a
// process in the step's own group was counted by no sacct line), and
// the step's task on this node is the one it reads for the node's line.
// The step's freezer group is waited for up to wait (see ExternWait).
func externGroups(layout cgroup.Layout, c slurm.Config, uid uint32, job string, wait time.Duration) (map[string]string, error) {
	rel := slurm.ExternDir(c.CgroupOrDefault(), int(uid), job)
	for deadline := time.Now().Add(wait); ; time.Sleep(externPoll) {
		_, err := layout.ProcsFiles(rel, Controllers[:1])
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return nil, err
		}
	}
	if layout.V2 {
		return map[string]string{"": rel}, nil
	}
	out := map[string]string{Controllers[0]: rel}
	for _, ctl := range Controllers[1:] {
		files, err := layout.ProcsFiles(rel, []string{ctl})
		if err != nil {
			continue
		}
		out[ctl] = rel
		ents, _ := os.ReadDir(filepath.Dir(files[0]))
		var names []string
		for _, e := range ents {
			if e.IsDir() {
				names = append(names, e.Name())
			}
		}
		if task, ok := slurm.ExternTask(names); ok {
			out[ctl] = path.Join(rel, task)
		}
	}
	return out, nil
}

// Ask reads the caller's Slurm job from its cgroup (none for pid 0) and
// asks the controller about the job it names (launch.SlurmAsk), starting
// scontrol under execMu (ckpt.CRIU.ExecMu).
func Ask(c slurm.Config, execMu *sync.Mutex) launch.SlurmAsk {
	return func(pid int32, id string) (string, slurm.Job, error) {
		callerJob := ""
		if pid > 0 {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(int(pid)) + "/cgroup")
			if err != nil {
				return "", slurm.Job{}, err
			}
			_, callerJob, _ = slurm.JobOfCgroup(string(b))
		}
		ctx, cancel := context.WithTimeout(context.Background(), AskTimeout)
		defer cancel()
		j, err := scontrol.Show(ctx, c.Scontrol, c.Conf, id, execMu)
		return callerJob, j, err
	}
}
