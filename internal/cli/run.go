package cli

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"

	"roam/internal/api"
	"roam/internal/docgen"
)

func (e *env) runCmd() *cobra.Command {
	var req api.RunRequest
	var detach, noPrefix, noSlurm bool
	var argsFrom, cpus, mem, carryDir string
	var carryMargin time.Duration
	c := &cobra.Command{
		Use:   "run [-n COUNT] [--args-from FILE] [--max-running K] [--output PATTERN] [--error PATTERN] [--on NODE] [--pin] [--cpus N] [--mem SIZE] [--no-slurm] [--carry DIR] [-d] -- PROG [ARGS...]",
		Short: "start processes on the best nodes; their output comes here, and their exit status",
		Long:  runLong,
		RunE: func(cmd *cobra.Command, args []string) (err error) {
			if err := prepareRun(&req, args, argsFrom, cmd.Flags().Changed("count")); err != nil {
				return err
			}
			if req.Count < 1 {
				return fmt.Errorf("-n: %d is out of range (at least 1)", req.Count)
			}
			if err := parseRequest(&req, cpus, mem); err != nil {
				return err
			}
			cl, err := e.client()
			if err != nil {
				return err
			}
			if req.Rerun == "" {
				req.Env = os.Environ()
				if req.Cwd, err = os.Getwd(); err != nil {
					return fmt.Errorf("working directory: %w", err)
				}
			}
			req.Stdin = req.Count == 1 && !detach && req.Rerun == ""
			if !noSlurm {
				// Inside a Slurm job, the run serves its allocation
				// (docs/slurm.md); the agent checks the claim.
				req.SlurmJob = os.Getenv("SLURM_JOB_ID")
			}
			if carryDir != "" {
				if detach || req.Rerun != "" {
					return fmt.Errorf("--carry: a carried sweep is followed to the allocation's end: no -d nor --rerun")
				}
				return e.runCarried(cl, req, carryDir, carryMargin, !noPrefix)
			}
			var relay *signalRelay
			if !detach {
				// Catch Ctrl-C from now on: one that comes while the jobs
				// start is delivered to them once they run.
				relay = startRelay(cl)
				defer relay.stop()
			}
			var resp api.RunResponse
			if err := cl.Do(context.Background(), http.MethodPost, api.PathRun, req, &resp); err != nil {
				return err
			}
			if err := e.started(resp, detach); err != nil || detach {
				return err
			}
			if resp.Sweep != "" {
				// Ctrl-C ends the sweep: its pending jobs too.
				relay.forward([]string{resp.Sweep})
				err := e.follow(cl, resp.IDs, !noPrefix, req.Stdin)
				e.summarize(cl, resp.Sweep)
				return err
			}
			relay.forward(resp.IDs)
			return e.follow(cl, resp.IDs, req.Count > 1 && !noPrefix, req.Stdin)
		},
	}
	c.Flags().SetInterspersed(false) // flags after the program are the program's
	c.Flags().IntVarP(&req.Count, "count", "n", 1, "number of processes: a sweep, with -n > 1 (default: --args-from's lines)")
	c.Flags().StringVar(&argsFrom, "args-from", "", "a sweep of one process a line of FILE: the line replaces {} in the command, its N-th word {N} (or it is the last argument)")
	c.Flags().IntVar(&req.MaxRunning, "max-running", 0, "run at most K of the sweep's processes at once; the others wait, pending")
	c.Flags().StringVar(&req.Output, "output", "", "write each process's stdout to PATTERN (%A sweep id, %a index, %j job id), as you")
	c.Flags().StringVar(&req.Error, "error", "", "write each process's stderr to PATTERN, as --output")
	c.Flags().StringVar(&req.Rerun, "rerun", "", "run the failed and lost indices of SWEEP again (or those of SWEEP:RANGES), as a new sweep")
	c.Flags().StringVar(&req.On, "on", "", "run on this node instead of the best one")
	_ = c.RegisterFlagCompletionFunc("on", e.completeNodeFlag)
	c.Flags().BoolVar(&req.Pin, "pin", false, "never migrate these processes")
	c.Flags().BoolVar(&noSlurm, "no-slurm", false, "inside a Slurm job (SLURM_JOB_ID set), run outside it: on any node, not in the job's allocation")
	c.Flags().BoolVarP(&detach, "detach", "d", false, "print the job ids and return; see 'roam logs' and 'roam attach'")
	c.Flags().BoolVar(&noPrefix, "no-prefix", false, "with -n > 1, do not prefix lines with [JOBID]")
	c.Flags().StringVar(&cpus, "cpus", "", "CPUs each process may use, e.g. 0.5 or 2 (default: the home's jobs.default_cpus)")
	c.Flags().StringVar(&mem, "mem", "", "memory each process may hold, e.g. 64M or 2G, MiB without a unit, or each its own from its --args-from line ({2}M); past it the kernel kills it (default: the home's jobs.default_mem_bytes)")
	c.Flags().StringVar(&carryDir, "carry", "", "carry the sweep across Slurm allocations in DIR, yours: at SIGUSR1 (sbatch --signal=B:USR1@SECONDS) checkpoint what runs into DIR; the same roam run --carry DIR in the next allocation restarts it (docs/slurm.md)")
	c.Flags().DurationVar(&carryMargin, "carry-margin", time.Minute, "with --carry, carry the sweep this long before the Slurm job's end (scontrol's EndTime), if SIGUSR1 did not come first")
	c.Flags().DurationVar(&req.CheckpointEvery, "checkpoint-every", 0, "checkpoint each process this often, kept on another node: a process whose node dies is restarted from it (e.g. 10m)")
	docgen.AddSection(c, "EXIT STATUS", exitStatuses)
	docgen.AddSection(c, "ENVIRONMENT", jobEnvironment)
	return withJobStatus(jsonVia(jsonStream, c))
}

// runLong is roam run's description.
const runLong = `Start COUNT processes of PROG on the best nodes of the cluster. Attached
(without -d), their output streams here, prefixed by job id when there are
several, Ctrl-C and other signals reach them wherever they run, and roam run
exits with their exit status (EXIT STATUS below). With -d it prints the job
ids and returns at once; roam attach follows them.

A run of more than one process is a sweep, with an id of its own,
HOMENODE:SEQ (n1:14; a job id has a dot, 1.15): roam ps, kill, logs and
attach take it, or some of its indices, as n1:14:3-7,9 (or Slurm's
n1:14[3-7,9], quoted). Each process has its index in ROAM_INDEX
(ENVIRONMENT below). --args-from FILE gives index i the i-th line of FILE:
it replaces every {} in the command's arguments, inside that argument as
it is (no shell reads it: spaces and quotes need no quoting; {{}} is a
literal {}), and its N-th word (words split at blanks) replaces {N}, as
GNU parallel's {1}, {2} (a shell's ${1} is left alone); where there is
neither, the line is appended as one more argument. A run whose command
names a word some line lacks is refused.
--max-running K starts K at once; the others are pending (roam ps says
why) and start, lowest index first, as others end. --output and --error
write each index's stdout and stderr into files, as you and never through
a symlink, at the node you typed roam run on (roam logs has them too). When
every index has ended, roam run prints a summary (ok, failed by exit
status, lost) on standard error, as roam ps SWEEP does later; --rerun SWEEP
runs its failed and lost indices again, with their commands, environments
and files, as a new sweep.

Inside a Slurm job (SLURM_JOB_ID set: an sbatch script, salloc, srun), the
processes run in that job's allocation: placed and moved among its nodes
only, each in the job's cgroup on whatever node it runs, so that Slurm
counts them, its limits hold them and its end of the job ends them.
A sweep there runs 3 processes at once for each CPU the job holds (or
--max-running); the others are pending, and start on the job's nodes as
others end. The node's agent checks the claim (docs/slurm.md); --no-slurm
runs them outside the job, as anywhere else. --carry DIR carries such a sweep across
allocations when its jobs outlast Slurm's time limit: at SIGUSR1 (sbatch
--signal=B:USR1@SECONDS, with roam run as the batch shell: exec it), or
--carry-margin before the job's end as scontrol says it, whichever comes
first, each
running job is checkpointed into DIR and ended by it, and the same
roam run --carry DIR in the next allocation restarts them there, refusing
while any job of the sweep runs anywhere; once no checkpoint is left in DIR
the sweep is done.

--cpus N and --mem SIZE are what each process may use, on every node it runs
on (without them: the home node's jobs.default_cpus, 1, and
jobs.default_mem_bytes, none). --cpus limits its CPU time to N CPUs (0.5, 2),
sets OMP_NUM_THREADS, OPENBLAS_NUM_THREADS and MKL_NUM_THREADS to N rounded
up unless you set them, and counts N rounded up where roam places jobs.
--mem limits its memory, its processes' and its /tmp's, to SIZE (64M, 2G;
MiB without a unit, as Slurm's): a process of it that needs more is killed
by the kernel within this job alone, the job ends (with status 137 when its
program was the one killed), and roam ps -l says "out of memory (--mem
SIZE)". --mem {2}M gives each index of --args-from its own request, here the
second word of its line in MiB (a sweep over problem sizes: "1.5 64" runs
with --mem 64M). A node takes a job only while the --mem of the jobs it holds and
this one's fit in its memory for jobs: the jobs of a run with --mem wait,
pending at the node you typed roam run on (roam ps says why), until some
node has room, and start as jobs end anywhere, the user with the fewest
jobs running there first; a run larger than any node's memory for jobs
is refused. Each job may also have at most the node's jobs.pids
processes and threads.

With --json it prints one JSON object a line: {"job","kind":"started","node"}
for each job (with "sweep", its sweep's id; "node" empty while it is
pending), then each line of output as {"job","kind":"stdout"|"stderr",
"text"} (or "bytes", base64, for a line that is not UTF-8), and
{"job","kind":"exit","exit_code"} or {"job","kind":"lost","node","at"} as
each ends (after {"job","kind":"cut","why"} if its output is incomplete:
its home's state disk was short), and a sweep's
{"kind":"summary","sweep","summary"} at its end (docs/scripting.md).`

// started says what a run started: with -d the job ids, one a line, and
// a sweep's id on standard error; with --json a record each.
func (e *env) started(resp api.RunResponse, detach bool) error {
	if e.json {
		for i, id := range resp.IDs {
			if err := e.record(jobRecord{Job: id, Kind: "started", Node: at(resp.Nodes, i), Sweep: resp.Sweep}); err != nil {
				return err
			}
		}
	}
	if e.json || !detach {
		return nil
	}
	if resp.Sweep != "" {
		pending := 0
		for _, n := range resp.Nodes {
			if n == "" {
				pending++
			}
		}
		fmt.Fprintf(e.errOut, "roam: sweep %s: %d jobs, %d pending\n", resp.Sweep, len(resp.IDs), pending)
	}
	for _, id := range resp.IDs {
		fmt.Fprintln(e.out, id)
	}
	return nil
}
