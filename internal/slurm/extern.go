package slurm

import (
	"fmt"
	"regexp"
	"strconv"
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
