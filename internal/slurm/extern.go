package slurm

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// ExternStep is the step id of a job's extern step (Slurm's
// SLURM_EXTERN_CONT, 0xfffffffc): its slurmstepd's socket is named by it.
const ExternStep = 0xfffffffc

// StepdSocket is the name, in the node's SlurmdSpoolDir, of the Unix socket
// of job's extern step's slurmstepd on node: NODE_JOB.STEP, as Slurm's
// stepd_connect builds it.
func StepdSocket(node, job string) (string, error) {
	if err := ValidJobID(job); err != nil {
		return "", err
	}
	if err := ValidNode(node); err != nil {
		return "", err
	}
	return fmt.Sprintf("%s_%s.%d", node, job, uint32(ExternStep)), nil
}

var taskDir = regexp.MustCompile(`^task_([0-9]{1,9})$`)

// ExternTask picks, from the names in a job's extern step's group under
// cpuacct or memory, the group of the step's own task on this node:
// task_N, N the node's index in the job (slurmstepd's "node ID as global
// task ID"), where jobacct_gather/cgroup counts the step. The step makes
// one; with none, or several, it returns false (the step's own group then,
// which that plugin does not count).
func ExternTask(names []string) (string, bool) {
	found := ""
	for _, n := range names {
		m := taskDir.FindStringSubmatch(n)
		if m == nil {
			continue
		}
		if _, err := strconv.Atoi(m[1]); err != nil {
			continue
		}
		if found != "" {
			return "", false
		}
		found = n
	}
	return found, found != ""
}

// stepTask matches a step's task group in a cgroup path: .../step_S/task_N.
var stepTask = regexp.MustCompile(`/job_[0-9]+/step_[a-z0-9]+/task_[0-9]+$`)

// InStepTask reports whether a process, by its /proc/PID/cgroup, is in a
// task group of a Slurm job's step under cpuacct (v1): the group
// jobacct_gather/cgroup reads for that step on this node, which counts it
// then without the step adopting it.
func InStepTask(procCgroup string) bool {
	for _, l := range strings.Split(procCgroup, "\n") {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) == 3 && slices.Contains(strings.Split(parts[1], ","), "cpuacct") {
			return stepTask.MatchString(parts[2])
		}
	}
	return false
}
