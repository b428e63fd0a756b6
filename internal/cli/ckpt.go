package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"time"

	"github.com/spf13/cobra"

	"roam/internal/api"
)

func (e *env) checkpointCmd() *cobra.Command {
	var out string
	var stop bool
	c := &cobra.Command{
		Use:   "checkpoint JOBID [-o FILE] [--stop]",
		Short: "save a running job into a file; roam restart brings it back",
		Long: `Save a running job, wherever it runs, into FILE (default JOBID.roamckpt
here): its memory, registers, open files and output so far. The job is
frozen while CRIU dumps it and then runs on; with --stop it ends once saved.

The file is yours (mode 0600) and sealed with the cluster's secret: roam
restart brings it back on this cluster, or on another with the same secret
and the same files; a changed file is refused.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				out = args[0] + ".roamckpt"
			}
			cl, err := e.client()
			if err != nil {
				return err
			}
			// Written as the user, never over a file that exists.
			f, err := os.OpenFile(out, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
			if errors.Is(err, fs.ErrExist) {
				return fmt.Errorf("-o %s: the file exists", out)
			}
			if err != nil {
				return fmt.Errorf("-o: %w", err)
			}
			n, err := cl.Fetch(context.Background(), api.PathCheckpoint, api.CheckpointRequest{ID: args[0], Stop: stop}, f)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				os.Remove(out)
				return err
			}
			if e.json {
				return e.printJSON(struct {
					ID      string `json:"id"`
					File    string `json:"file"`
					Bytes   int64  `json:"bytes"`
					Stopped bool   `json:"stopped"`
				}{args[0], out, n, stop})
			}
			what := "runs on"
			if stop {
				what = "is ended"
			}
			fmt.Fprintf(e.errOut, "roam: %s saved to %s (%s); the job %s\n", args[0], out, api.Bytes(n), what)
			return nil
		},
	}
	c.Flags().StringVarP(&out, "output", "o", "", "the file to write (it must not exist)")
	c.Flags().BoolVar(&stop, "stop", false, "end the job once it is saved")
	c.ValidArgsFunction = e.completeJobs(liveJobs...)
	return jsonVia(jsonValue, c)
}

func (e *env) restartCmd() *cobra.Command {
	var on string
	var detach, noSlurm bool
	c := &cobra.Command{
		Use:   "restart FILE [--on NODE] [--no-slurm] [-d]",
		Short: "run a job again from its checkpoint file",
		Long: `Run the job saved in FILE (roam checkpoint) again, on the best node or on
NODE, as the same job, which its home must still know. It is refused while
the job still runs anywhere, when root or a limit ended it, once the job
is purged, past the file's expiry (limits.checkpoint_expiry), and by
another cluster. Inside a Slurm job (SLURM_JOB_ID set) it restarts in that
job's allocation, as roam run does, whatever Slurm job it served before
(--no-slurm: outside any). Its output goes on from where the checkpoint was taken:
roam logs shows it whole. Attached (without -d), roam restart follows its output from the
checkpoint on and exits with its exit status, as roam run does.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, size, err := openCheckpoint(args[0])
			if err != nil {
				return err
			}
			defer f.Close()
			cl, err := e.client()
			if err != nil {
				return err
			}
			q := url.Values{"on": {on}}
			if !noSlurm {
				// Inside a Slurm job, it restarts in that job's
				// allocation (docs/slurm.md); the agent checks the claim.
				q.Set("slurm", os.Getenv("SLURM_JOB_ID"))
			}
			var res api.RestartResponse
			if err := cl.Upload(context.Background(), api.PathRestart+"?"+q.Encode(), f, size, &res); err != nil {
				return err
			}
			if e.json {
				if err := e.record(jobRecord{Job: res.ID, Kind: "started", Node: res.Node}); err != nil {
					return err
				}
			} else {
				fmt.Fprintf(e.errOut, "roam: %s restarted on node %s\n", res.ID, res.Node)
			}
			if detach {
				if !e.json {
					fmt.Fprintln(e.out, res.ID)
				}
				return nil
			}
			relay := startRelay(cl)
			defer relay.stop()
			relay.forward([]string{res.ID})
			// From where the checkpoint left the output.
			o, err := getOutput(cl, res.ID, 0, 0, 0)
			var from [2]int64
			if err == nil && o.Restart != nil {
				from = [2]int64{o.Restart.Out, o.Restart.Err}
			}
			return e.followFrom(cl, []string{res.ID}, false, false, map[string][2]int64{res.ID: from})
		},
	}
	c.Flags().StringVar(&on, "on", "", "restart on this node instead of the best one")
	_ = c.RegisterFlagCompletionFunc("on", e.completeNodeFlag)
	c.Flags().BoolVarP(&detach, "detach", "d", false, "print the job id and return")
	c.Flags().BoolVar(&noSlurm, "no-slurm", false, "inside a Slurm job (SLURM_JOB_ID set), restart outside it")
	return withJobStatus(jsonVia(jsonStream, c))
}

// openCheckpoint opens a checkpoint file to send to roam restart, with its
// size; a file that is not a regular one is refused.
func openCheckpoint(path string) (*os.File, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = fmt.Errorf("%s: not a regular file", path)
	}
	if err != nil {
		f.Close()
		return nil, 0, err
	}
	return f, fi.Size(), nil
}

// restartNote is what a follower says when a job restarted from a
// checkpoint under it.
func restartNote(id string, r *api.Restart) string {
	return fmt.Sprintf("roam: %s restarted from the checkpoint of %s on node %s (%s); output after it may repeat",
		id, r.CheckpointAt.Local().Format(time.TimeOnly), r.Node, r.Why)
}
