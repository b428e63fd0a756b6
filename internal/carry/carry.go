// Package carry is the pure rules of a sweep carried across Slurm
// allocations (roam run --carry DIR, docs/slurm.md "Longer than the time
// limit"): at Slurm's warning before the time limit, which of the sweep's
// jobs are checkpointed and what the carry directory records of each; in
// the next allocation, which checkpoints are restarted, and when the
// resume is refused. The CLI does the I/O (the checkpoints, the restarts,
// the state file, written as the user); this package reads no clock and
// touches no file.
//
// The rule that makes "never twice" hold: a job is carried only by a
// checkpoint taken with it stopped and ended by that checkpoint (roam
// checkpoint --stop), so nothing of it runs past the checkpoint; a resume
// is refused while any job of the sweep is pending, starting or running
// anywhere; and a checkpoint is restarted only while the job's home has
// restarted it exactly as often as when the checkpoint was taken (its
// Restarts), so a file a crashed resume left behind, once restarted, is
// never restarted again.
package carry

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	"roam/internal/sweep"
)

// Version is the state file's format.
const Version = 1

// State is what the carry directory's state file (StateFile) holds.
type State struct {
	Version int `json:"version"`
	// Sweep is the sweep's id (HOME:SEQ); Argv the run's command line
	// after "roam run" (its flags and program), which a later run of the
	// same directory must repeat.
	Sweep string   `json:"sweep"`
	Argv  []string `json:"argv"`
	// Jobs are the sweep's jobs, by index.
	Jobs []Job `json:"jobs"`
	// Allocations are the Slurm jobs that served the sweep, in order.
	Allocations []string `json:"allocations,omitempty"`
}

// Job is one job of the carried sweep.
type Job struct {
	ID    string `json:"id"`
	Index int    `json:"index"`
	// File is its checkpoint (a name in the carry directory), taken
	// with the job stopped and ended by it; "" for none.
	File string `json:"file,omitempty"`
	// Restarts is how often its home had restarted it when File was
	// taken: File restarts only while the home says the same.
	Restarts int `json:"restarts"`
}

// StateFile is the state's name in the carry directory.
const StateFile = "carry.json"

// Seen is what the home says of one job of the sweep now (roam ps).
type Seen struct {
	ID       string
	Index    int
	State    string // sweep.Pending, Starting, Running, Finished, Lost
	Restarts int
}

// live says the job runs, or will without anyone asking.
func live(s Seen) bool {
	return s.State == sweep.Pending || s.State == sweep.Starting || s.State == sweep.Running
}

// FileName is the checkpoint file of job id in the carry directory.
func FileName(id string) string { return id + ".roamckpt" }

// Warning is what to do at Slurm's warning: the jobs to checkpoint (each
// running or starting one, lowest index first). A pending job has no
// process to save: Record leaves it without a file.
func Warning(seen []Seen) []string {
	s := sorted(seen)
	var out []string
	for _, j := range s {
		if j.State == sweep.Running || j.State == sweep.Starting {
			out = append(out, j.ID)
		}
	}
	return out
}

// Record is the state after the warning's checkpoints: taken holds the
// jobs whose checkpoint was written whole (with the job stopped), by id.
// Every job of the sweep is listed; one carried has its file and the
// Restarts its home said; any other has none (it ended, or it ends with
// the allocation).
func Record(st State, seen []Seen, taken map[string]bool) State {
	out := st
	out.Jobs = nil
	for _, j := range sorted(seen) {
		rec := Job{ID: j.ID, Index: j.Index, Restarts: j.Restarts}
		if taken[j.ID] {
			rec.File = FileName(j.ID)
		}
		out.Jobs = append(out.Jobs, rec)
	}
	return out
}

// ErrLive refuses a resume while a job of the sweep runs.
var ErrLive = errors.New("carry: a job of the sweep still runs")

// Plan is what a resume does.
type Plan struct {
	// Restart are the jobs to restart from their files, lowest index
	// first.
	Restart []Job
	// Stale are jobs whose file was restarted since it was taken (their
	// home restarted them more often): the file is dropped, never
	// restarted.
	Stale []Job
}

// Resume is what a run of the carry directory does in the next
// allocation, from the state and what the home says of the sweep's jobs
// now. It refuses while any job of the sweep is pending, starting or
// running anywhere (naming them), and when the state names a job the
// home does not list.
func Resume(st State, seen []Seen) (Plan, error) {
	byID := map[string]Seen{}
	var running []string
	for _, s := range seen {
		byID[s.ID] = s
		if live(s) {
			running = append(running, s.ID+" ("+s.State+")")
		}
	}
	if len(running) > 0 {
		sort.Strings(running)
		return Plan{}, fmt.Errorf("%w: %s: a resume starts none of it while any of it runs (roam ps %s)", ErrLive, strings.Join(running, ", "), st.Sweep)
	}
	var p Plan
	for _, j := range st.Jobs {
		if j.File == "" {
			continue
		}
		s, ok := byID[j.ID]
		switch {
		case !ok:
			return Plan{}, fmt.Errorf("carry: job %s of sweep %s: its home lists no such job (purged?)", j.ID, st.Sweep)
		case s.Restarts != j.Restarts:
			p.Stale = append(p.Stale, j)
		default:
			p.Restart = append(p.Restart, j)
		}
	}
	return p, nil
}

// Restarted is the state once job id restarted from its file: it holds
// no file any more (the file is removed after this is written), and its
// Restarts is the home's new count.
func Restarted(st State, id string, restarts int) State {
	out := st
	out.Jobs = slices.Clone(st.Jobs)
	for i := range out.Jobs {
		if out.Jobs[i].ID == id {
			out.Jobs[i].File, out.Jobs[i].Restarts = "", restarts
		}
	}
	return out
}

// Done says whether the sweep needs no further allocation: every job
// ended and none is carried.
func Done(st State, seen []Seen) bool {
	for _, s := range seen {
		if live(s) {
			return false
		}
	}
	for _, j := range st.Jobs {
		if j.File != "" {
			return false
		}
	}
	return true
}

// SameRun checks that a run of the carry directory is the run it
// carries: the same command line after "roam run".
func SameRun(st State, argv []string) error {
	if !slices.Equal(st.Argv, argv) {
		return fmt.Errorf("--carry: the directory carries sweep %s of `roam run %s`, not `roam run %s`: use another directory for another run", st.Sweep, strings.Join(st.Argv, " "), strings.Join(argv, " "))
	}
	return nil
}

// Check checks a state read from the directory: a file of another
// version, a sweep id that is not one, or a job named twice is refused.
func Check(st State) error {
	if st.Version != Version {
		return fmt.Errorf("%s: version %d, this roam reads %d", StateFile, st.Version, Version)
	}
	if _, ok := sweep.Home(st.Sweep); !ok {
		return fmt.Errorf("%s: %q is not a sweep id", StateFile, st.Sweep)
	}
	ids := map[string]bool{}
	for _, j := range st.Jobs {
		if ids[j.ID] || j.ID == "" || strings.ContainsAny(j.ID, "/\x00") {
			return fmt.Errorf("%s: job %q is not a job id, or is named twice", StateFile, j.ID)
		}
		ids[j.ID] = true
		if j.File != "" && j.File != FileName(j.ID) {
			return fmt.Errorf("%s: job %s's file %q is not %s", StateFile, j.ID, j.File, FileName(j.ID))
		}
	}
	return nil
}

func sorted(seen []Seen) []Seen {
	s := slices.Clone(seen)
	sort.Slice(s, func(i, j int) bool { return s[i].Index < s[j].Index })
	return s
}
