package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"roam/internal/docgen"
)

// exitStatuses are the exit statuses of a command that exits with its
// jobs' (roam run, attach, restart): its --help and man page print this
// table, and TestExitStatusTable provokes every row.
var exitStatuses = [][2]string{
	{"0", "every job exited 0 (with -d: every job started)"},
	{"1-253", "the first non-zero exit status of the jobs, in job order (a sweep's: index order; its summary on standard error says how every index ended); a job killed by signal S has 128+S (SIGTERM: 143), and so has a sweep's job ended by roam kill before it started"},
	{"254", "the first non-zero status is a job lost with its node: membership declared the node dead, and roam ps shows the job lost with the node and the time. A job run with --checkpoint-every is restarted from its newest checkpoint on another node instead, and roam run says so and goes on"},
	{"255", "roam itself failed: bad input (a flag, -n 0), no agent, a request the agent refused, or its agent gone for 5 minutes; the reason is one line on standard error"},
	{"", "A job's own exit status of 254 or 255 comes through as it is: roam ps says which job ended how"},
}

// otherExitStatuses are every other command's.
var otherExitStatuses = [][2]string{
	{"0", "done as asked"},
	{"1", "not done, or not all of it: one line on standard error for each thing not done (roam ps: a job named is not listed; roam kill: a job not signalled)"},
	{"", "roam run, attach and restart exit with their jobs' status (roam run --help); roam cluster exec with its command's; roam logs -f with 0 once the job ended, whatever its status"},
}

// jobEnvironment are the variables roam sets in each job's environment
// (the agent's jobEnv), and those roam itself reads.
var jobEnvironment = [][2]string{
	{"ROAM_JOB", "set in each job: its id, HOMENODE.SEQ (1.17)"},
	{"ROAM_INDEX", "set in each job: its index in its sweep, 0 to COUNT-1, in the order of their ids (its share of the sweep, like Slurm's SLURM_ARRAY_TASK_ID); a rerun's job keeps the index it had"},
	{"ROAM_COUNT", "set in each job: COUNT, the -n of its roam run (of the first run, in a rerun)"},
	{"ROAM_SWEEP", "set in each job of a sweep: the sweep's id, HOMENODE:SEQ (1:16)"},
	{"OMP_NUM_THREADS, OPENBLAS_NUM_THREADS, MKL_NUM_THREADS", "set in each job that you did not set them for: its --cpus rounded up, so that OpenMP and BLAS start as many threads as it may run rather than one a core of the machine"},
	{"ROAM_SOCKET", "read by roam: the agent's socket, as --socket (default /run/roam/roamd.sock)"},
	{"ROAM_CLUSTER, ROAM_NODE", "read by roam: the emulated cluster and its node to ask, as --cluster and --node"},
}

// exitWithJobs is the annotation of a command whose exit status is its
// jobs' (exitStatuses): any failure of roam's own exits 255.
const exitWithJobs = "roam-exit-jobs"

// withJobStatus marks c as exiting with its jobs' status.
func withJobStatus(c *cobra.Command) *cobra.Command {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[exitWithJobs] = "1"
	return c
}

// withSections makes the help of root and every command under it print
// the command's own sections (docgen.AddSection) after its description;
// the man page has them too.
func withSections(root *cobra.Command) {
	root.SetHelpFunc(func(cmd *cobra.Command, _ []string) {
		text := cmd.Long
		if text == "" {
			text = cmd.Short
		}
		fmt.Fprintf(cmd.OutOrStdout(), "%s\n\n%s%s", strings.TrimSpace(text), docgen.Help(cmd), cmd.UsageString())
	})
}
