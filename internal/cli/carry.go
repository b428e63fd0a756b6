package cli

// roam run --carry DIR: a sweep carried across Slurm allocations
// (docs/slurm.md, "Longer than the time limit"). The rules are package
// carry's; this file does their I/O: the state file and the checkpoints
// in DIR, written as the user, and the agent's checkpoints and restarts.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"roam/internal/api"
	"roam/internal/carry"
	"roam/internal/slurm"
	"roam/internal/slurm/scontrol"
	"roam/internal/sweep"
)

// carryWidth bounds the checkpoints taken at once at the warning.
const carryWidth = 4

// carryAfterWait bounds the wait, once the sweep is carried, for the
// followers to print the last output of the jobs its checkpoints ended.
const carryAfterWait = 10 * time.Second

// carryRunArgs is what a carried run is recognised by in its directory:
// the request's count, files and command.
func carryRunArgs(req api.RunRequest) []string {
	out := []string{"-n", strconv.Itoa(req.Count)}
	if req.Output != "" {
		out = append(out, "--output", req.Output)
	}
	if req.Error != "" {
		out = append(out, "--error", req.Error)
	}
	if len(req.Args) > 0 {
		out = append(out, "--args-from", strconv.Itoa(len(req.Args))+" lines")
	}
	return append(append(out, "--"), req.Argv...)
}

// checkCarryDir refuses a directory that is not the caller's own: its
// state and checkpoints are written there as the user.
func checkCarryDir(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("--carry: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	switch {
	case !fi.IsDir():
		return fmt.Errorf("--carry: %s is not a directory", dir)
	case ok && st.Uid != uint32(os.Getuid()):
		return fmt.Errorf("--carry: %s is not yours (uid %d)", dir, st.Uid)
	case fi.Mode().Perm()&0o022 != 0:
		return fmt.Errorf("--carry: %s is writable by others (mode %o): its checkpoints restart as you", dir, fi.Mode().Perm())
	}
	return nil
}

func readCarry(dir string) (carry.State, bool, error) {
	b, err := os.ReadFile(filepath.Join(dir, carry.StateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return carry.State{}, false, nil
	}
	if err != nil {
		return carry.State{}, false, fmt.Errorf("--carry: %w", err)
	}
	var st carry.State
	if err := json.Unmarshal(b, &st); err != nil {
		return carry.State{}, false, fmt.Errorf("--carry: %s: %w", carry.StateFile, err)
	}
	if err := carry.Check(st); err != nil {
		return carry.State{}, false, fmt.Errorf("--carry: %w", err)
	}
	return st, true, nil
}

// writeCarry writes the state whole or not at all.
func writeCarry(dir string, st carry.State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, "."+carry.StateFile+".new")
	if err := writeSynced(tmp, b); err != nil {
		return fmt.Errorf("--carry: %w", err)
	}
	return os.Rename(tmp, filepath.Join(dir, carry.StateFile))
}

func writeSynced(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if serr := f.Sync(); err == nil {
		err = serr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// seenNow is what the homes say of the sweep's jobs now.
func seenNow(cl *api.Client, sweepID string) ([]carry.Seen, error) {
	var js []api.Job
	if err := cl.Get(api.PathPS, &js); err != nil {
		return nil, err
	}
	var out []carry.Seen
	for _, j := range js {
		if j.Sweep != sweepID || j.Index == nil {
			continue
		}
		state := j.State
		if state == api.StateStopped {
			state = sweep.Running
		}
		out = append(out, carry.Seen{ID: j.ID, Index: *j.Index, State: state, Restarts: len(j.Restarts)})
	}
	return out, nil
}

// runCarried is roam run --carry DIR: it starts the sweep, or resumes the
// one DIR carries, follows it, and at SIGUSR1 (Slurm's warning,
// sbatch --signal=B:USR1@SECONDS), or margin before the Slurm job's end,
// checkpoints what runs into DIR.
func (e *env) runCarried(cl *api.Client, req api.RunRequest, dir string, margin time.Duration, prefix bool) error {
	// Before anything starts: SIGUSR1's default would end roam run.
	warn := make(chan os.Signal, 1)
	signal.Notify(warn, syscall.SIGUSR1)
	defer signal.Stop(warn)
	if err := checkCarryDir(dir); err != nil {
		return err
	}
	st, had, err := readCarry(dir)
	if err != nil {
		return err
	}
	args := carryRunArgs(req)
	var ids []string
	from := map[string][2]int64{}
	if had {
		if err := carry.SameRun(st, args); err != nil {
			return err
		}
		if ids, err = e.resumeCarried(cl, dir, &st, req.SlurmJob, from); err != nil {
			return err
		}
	} else {
		// Every job starts at once: a carry records no pending job
		// (package carry), where a run in an allocation would otherwise
		// hold some back (launch.JobsPerCPU).
		if req.MaxRunning > 0 && req.MaxRunning < req.Count {
			return fmt.Errorf("--carry: a carried sweep starts every job at once: no --max-running")
		}
		if req.Count > 1 {
			req.MaxRunning = req.Count
		}
		var resp api.RunResponse
		if err := cl.Do(context.Background(), http.MethodPost, api.PathRun, req, &resp); err != nil {
			return err
		}
		if resp.Sweep == "" {
			return fmt.Errorf("--carry carries a sweep: -n 2 or more")
		}
		st = carry.State{Version: carry.Version, Sweep: resp.Sweep, Argv: args}
		for i, id := range resp.IDs {
			st.Jobs = append(st.Jobs, carry.Job{ID: id, Index: i})
		}
		ids = resp.IDs
	}
	if req.SlurmJob != "" {
		st.Allocations = append(st.Allocations, req.SlurmJob)
	}
	if err := writeCarry(dir, st); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- e.followFrom(cl, ids, prefix, false, from) }()
	stop := make(chan struct{})
	defer close(stop)
	select {
	case err := <-done:
		e.summarize(cl, st.Sweep)
		return err
	case <-warn:
		fmt.Fprintf(e.errOut, "roam: sweep %s: Slurm's warning (SIGUSR1): carrying it\n", st.Sweep)
	case <-e.carryDeadline(req.SlurmJob, margin, stop):
		fmt.Fprintf(e.errOut, "roam: sweep %s: %v before Slurm job %s's end: carrying it\n", st.Sweep, margin, req.SlurmJob)
	}
	if err := e.carryOver(cl, dir, st, margin); err != nil {
		return err
	}
	select {
	case <-done:
	case <-time.After(carryAfterWait):
	}
	return nil
}

// carryPoll bounds how long a change of the Slurm job's time limit
// (scontrol update) goes unseen.
const carryPoll = 20 * time.Second

// carryDeadline is closed margin before Slurm job id's end, as scontrol
// says it, read again every carryPoll (never, outside a Slurm job or
// when scontrol cannot say), until stop is closed. Slurm's own warning
// (--signal) may come up to a minute early, by its documentation: the
// end time is exact.
func (e *env) carryDeadline(id string, margin time.Duration, stop <-chan struct{}) <-chan struct{} {
	at := make(chan struct{})
	if id == "" || margin <= 0 {
		return at
	}
	go func() {
		said := false
		for {
			ctx, cancel := context.WithTimeout(context.Background(), carryPoll)
			end, ok, err := scontrol.End(ctx, id)
			cancel()
			wait := carryPoll
			switch {
			case err != nil && !said:
				fmt.Fprintf(e.errOut, "roam: Slurm job %s's end time: %v (SIGUSR1 still carries the sweep)\n", id, err)
				said = true
			case ok && time.Until(end) <= margin:
				close(at)
				return
			case ok:
				wait = min(wait, time.Until(end)-margin)
			}
			select {
			case <-stop:
				return
			case <-time.After(wait):
			}
		}
	}()
	return at
}

// resumeCarried restarts the checkpoints st carries in the Slurm job
// slurmJob, and returns the jobs restarted, with the output offsets
// their followers start from.
func (e *env) resumeCarried(cl *api.Client, dir string, st *carry.State, slurmJob string, from map[string][2]int64) ([]string, error) {
	seen, err := seenNow(cl, st.Sweep)
	if err != nil {
		return nil, err
	}
	plan, err := carry.Resume(*st, seen)
	if err != nil {
		return nil, err
	}
	for _, j := range plan.Stale {
		fmt.Fprintf(e.errOut, "roam: sweep %s: %s was restarted since its checkpoint %s was taken: the file is dropped\n", st.Sweep, j.ID, j.File)
		*st = carry.Restarted(*st, j.ID, j.Restarts)
		if err := writeCarry(dir, *st); err != nil {
			return nil, err
		}
		os.Remove(filepath.Join(dir, j.File))
	}
	var ids []string
	spread := allocationNodes(cl)
	for k, j := range plan.Restart {
		on := ""
		if len(spread) > 0 {
			on = spread[k%len(spread)]
		}
		res, err := restartFile(cl, filepath.Join(dir, j.File), slurmJob, on)
		if err != nil {
			// Its file stays: the next run of DIR tries it again.
			fmt.Fprintf(e.errOut, "roam: sweep %s: %s not restarted: %v\n", st.Sweep, j.ID, err)
			continue
		}
		*st = carry.Restarted(*st, j.ID, j.Restarts+1)
		if err := writeCarry(dir, *st); err != nil {
			return nil, err
		}
		os.Remove(filepath.Join(dir, j.File))
		fmt.Fprintf(e.errOut, "roam: %s restarted on node %s\n", res.ID, res.Node)
		if o, err := getOutput(cl, res.ID, 0, 0, 0); err == nil && o.Restart != nil {
			from[res.ID] = [2]int64{o.Restart.Out, o.Restart.Err}
		}
		ids = append(ids, res.ID)
	}
	if len(ids) == 0 && len(plan.Restart) > 0 {
		return nil, fmt.Errorf("sweep %s: none of its %d checkpoints restarted", st.Sweep, len(plan.Restart))
	}
	return ids, nil
}

// allocationNodes are the live roam nodes of the Slurm job the caller
// runs in (SLURM_JOB_NODELIST, by the Slurm names the nodes give), in
// Slurm's order: the restarts go round them. Placed one by one, every
// restart would go where the load the others add is not seen yet, and
// the policy would then spread them by migrations. None when not known.
func allocationNodes(cl *api.Client) []string {
	names, err := slurm.ExpandHostlist(os.Getenv("SLURM_JOB_NODELIST"))
	var ns []api.NodeInfo
	if err != nil || len(names) == 0 || cl.Get(api.PathNodes, &ns) != nil {
		return nil
	}
	var out []string
	for _, name := range names {
		for _, n := range ns {
			if n.Alive && n.Slurm == name {
				out = append(out, n.ID)
			}
		}
	}
	return out
}

// restartFile is roam restart FILE in Slurm job slurmJob ("" none), on
// node on ("" the best one).
func restartFile(cl *api.Client, path, slurmJob, on string) (api.RestartResponse, error) {
	var res api.RestartResponse
	f, size, err := openCheckpoint(path)
	if err != nil {
		return res, err
	}
	defer f.Close()
	q := url.Values{"slurm": {slurmJob}, "on": {on}}
	err = cl.Upload(context.Background(), api.PathRestart+"?"+q.Encode(), f, size, &res)
	return res, err
}

// carryOver is the warning's work: each running job of the sweep
// checkpointed into dir and ended by it, and the state that says so.
func (e *env) carryOver(cl *api.Client, dir string, st carry.State, margin time.Duration) error {
	deadline := time.Now().Add(margin / 2)
	seen, err := seenNow(cl, st.Sweep)
	if err != nil {
		return err
	}
	todo := carry.Warning(seen)
	taken := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	width := make(chan struct{}, carryWidth)
	for _, id := range todo {
		wg.Add(1)
		width <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-width }()
			err := checkpointRetried(cl, id, filepath.Join(dir, carry.FileName(id)), deadline)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				fmt.Fprintf(e.errOut, "roam: %s: not carried: %v\n", id, err)
				return
			}
			taken[id] = true
		}()
	}
	wg.Wait()
	st = carry.Record(st, seen, taken)
	if err := writeCarry(dir, st); err != nil {
		return err
	}
	var lost []string
	for _, id := range todo {
		if !taken[id] {
			lost = append(lost, id)
		}
	}
	fmt.Fprintf(e.errOut, "roam: sweep %s: %d of its %d running jobs checkpointed into %s (the next roam run --carry %s restarts them)\n",
		st.Sweep, len(taken), len(todo), dir, dir)
	if len(lost) > 0 {
		fmt.Fprintf(e.errOut, "roam: sweep %s: %s not checkpointed: they end with the allocation\n", st.Sweep, strings.Join(lost, " "))
	}
	return nil
}

// carryRetry is the pause between two tries of a job's checkpoint.
const carryRetry = time.Second

// checkpointRetried is checkpointInto, tried again until deadline while
// the job runs: a job that a policy is moving at the warning is refused
// ("already migrating") until its move ended.
func checkpointRetried(cl *api.Client, id, path string, deadline time.Time) error {
	for {
		err := checkpointInto(cl, id, path)
		if err == nil || strings.Contains(err.Error(), "not running") || time.Now().Add(carryRetry).After(deadline) {
			return err
		}
		time.Sleep(carryRetry)
	}
}

// checkpointInto is roam checkpoint --stop ID -o path: the file is
// written under another name and renamed once whole, so a checkpoint cut
// short by the allocation's end is never taken for one.
func checkpointInto(cl *api.Client, id, path string) error {
	tmp := filepath.Join(filepath.Dir(path), "."+filepath.Base(path)+".part")
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = cl.Fetch(context.Background(), api.PathCheckpoint, api.CheckpointRequest{ID: id, Stop: true}, f)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
