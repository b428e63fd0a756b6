package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"roam/internal/api"
	"roam/internal/emu"
)

// The benchmark framework of seed 000 §4 and §6: overall performance (run
// time, speedup, efficiency), communication cost (traffic) and
// load-balancing cost (load-balancing time, migration overhead), measured
// on emulated clusters that each experiment brings up and tears down.
// docs/benchmarks.md explains every metric and its formula.

// Experiment is one of `roam bench`'s experiments.
type Experiment struct {
	Name  string
	Title string
	Seed  string // the seed figure or table it reproduces
	About string // what it runs and what it measures
	run   func(x *Run) error
}

// Experiments are the framework's experiments in the order `all` runs them.
var Experiments = []*Experiment{
	expSpeedup, expLVM, expDynamicStatic, expMigrationCost, expSyscallCost, expTraffic, expMigrate, expCheckpoint, expWebDelay,
	expBurst, expJobStart, expSweep,
}

// Lookup finds an experiment by name.
func Lookup(name string) (*Experiment, error) {
	var names []string
	for _, e := range Experiments {
		if e.Name == name {
			return e, nil
		}
		names = append(names, e.Name)
	}
	return nil, fmt.Errorf("unknown experiment %q (roam bench list names them: %s, all)", name, strings.Join(names, ", "))
}

// Options are the flags of `roam bench EXPERIMENT`.
type Options struct {
	Quick bool   // 1 repetition, small work: for CI
	Reps  int    // repetitions of every point; 0: 6, or 1 with Quick
	Out   string // directory of the results
	Bin   string // directory of roamd and the workloads
	// Command is the command line, written into the report.
	Command string
}

// DefaultReps is seed 000 §5.2's number of repetitions.
const DefaultReps = 6

// Measure is one metric at one point of one series, over the repetitions.
type Measure struct {
	Series string    `json:"series"`
	X      float64   `json:"x"`
	Metric string    `json:"metric"`
	Unit   string    `json:"unit"`
	Values []float64 `json:"values"`
	Mean   float64   `json:"mean"`
	Std    float64   `json:"std"` // sample standard deviation; 0 with one value
}

// Chart is one figure: Metric against X, a line per series.
type Chart struct {
	File   string `json:"file"`
	Title  string `json:"title"`
	Metric string `json:"metric"`
	XLabel string `json:"x_label"`
	YLabel string `json:"y_label"`
	// Only, when set, keeps the series whose names contain it.
	Only string `json:"only,omitempty"`
}

// Check is a sanity check on the numbers, written into the report; the
// tests fail on a false one.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// Result is one experiment's run.
type Result struct {
	Experiment string    `json:"experiment"`
	Title      string    `json:"title"`
	Seed       string    `json:"seed"`
	About      string    `json:"about"`
	Setup      string    `json:"setup"`
	XLabel     string    `json:"x_label"`
	Quick      bool      `json:"quick"`
	Reps       int       `json:"reps"`
	Started    time.Time `json:"started"`
	Seconds    float64   `json:"seconds"`
	Measures   []Measure `json:"measures"`
	Charts     []Chart   `json:"charts"`
	Checks     []Check   `json:"checks"`
	Notes      []string  `json:"notes,omitempty"`
	// Pivot are metrics shown in a table of their own, a row per series
	// and a column per x (many series, each measured at every x).
	Pivot []string `json:"pivot,omitempty"`
}

// Add records one repetition's value of a metric.
func (r *Result) Add(series string, x float64, metric, unit string, v float64) {
	for i := range r.Measures {
		m := &r.Measures[i]
		if m.Series == series && m.X == x && m.Metric == metric {
			m.Values = append(m.Values, v)
			m.Mean, m.Std = meanStd(m.Values)
			return
		}
	}
	r.Measures = append(r.Measures, Measure{Series: series, X: x, Metric: metric, Unit: unit, Values: []float64{v}, Mean: v})
}

// Get returns a measure, or nil.
func (r *Result) Get(series string, x float64, metric string) *Measure {
	for i := range r.Measures {
		if m := &r.Measures[i]; m.Series == series && m.X == x && m.Metric == metric {
			return m
		}
	}
	return nil
}

// Check records a sanity check.
func (r *Result) Check(name string, ok bool, format string, a ...any) {
	r.Checks = append(r.Checks, Check{Name: name, OK: ok, Detail: fmt.Sprintf(format, a...)})
}

func meanStd(v []float64) (float64, float64) {
	if len(v) == 0 {
		return 0, 0
	}
	s := 0.0
	for _, x := range v {
		s += x
	}
	m := s / float64(len(v))
	if len(v) == 1 {
		return m, 0
	}
	ss := 0.0
	for _, x := range v {
		ss += (x - m) * (x - m)
	}
	return m, math.Sqrt(ss / float64(len(v)-1))
}

// Run is one experiment in progress: its options, its result and its
// progress line.
type Run struct {
	Options
	Res      *Result
	progress io.Writer
	total    int // measured runs planned
	done     int
	began    time.Time
	prefix   string
}

// plan sets how many measured runs the experiment will make, for the
// estimate of time left.
func (x *Run) plan(n int) { x.total, x.done, x.began = n, 0, time.Now() }

// step reports a measured run as started: a line with the estimate of the
// time left, from the mean time of the runs done.
func (x *Run) step(format string, a ...any) {
	el := time.Since(x.began)
	left := "estimating"
	if x.done > 0 {
		left = "about " + (el / time.Duration(x.done) * time.Duration(x.total-x.done)).Round(time.Second).String() + " left"
	}
	x.done++
	fmt.Fprintf(x.progress, "%s[%s %d/%d] %s (%s elapsed, %s)\n", x.prefix, x.Res.Experiment, x.done, x.total, fmt.Sprintf(format, a...), el.Round(time.Second), left)
}

// note writes a line of progress that is not a measured run.
func (x *Run) note(format string, a ...any) {
	fmt.Fprintf(x.progress, "%s[%s] %s\n", x.prefix, x.Res.Experiment, fmt.Sprintf(format, a...))
}

// pick returns quick when the run is quick, else full.
func pick[T any](x *Run, quick, full T) T {
	if x.Quick {
		return quick
	}
	return full
}

// tool is the path of a binary beside roamd.
func (x *Run) tool(name string) string { return filepath.Join(x.Bin, name) }

// RunExperiments runs the experiments one after the other and writes their
// results, charts and report into opts.Out. It returns the results even
// when one experiment fails, with the error.
func RunExperiments(exps []*Experiment, opts Options, progress io.Writer) ([]*Result, error) {
	if opts.Reps == 0 {
		opts.Reps = DefaultReps
		if opts.Quick {
			opts.Reps = 1
		}
	}
	if opts.Reps < 1 || opts.Reps > 100 {
		return nil, fmt.Errorf("--reps: %d is out of range (1 to 100)", opts.Reps)
	}
	for _, w := range []string{"roamd", "roam-init", "dkg", "usercode", "syscode", "mgs", "migjob", "burn", "bgload", "roam-ckpt", "roam", "startloop", "sweepjob"} {
		if _, err := os.Stat(filepath.Join(opts.Bin, w)); err != nil {
			return nil, fmt.Errorf("%s is missing (make build makes it)", filepath.Join(opts.Bin, w))
		}
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, fmt.Errorf("--out: %w", err)
	}
	var out []*Result
	var firstErr error
	for i, e := range exps {
		res := &Result{Experiment: e.Name, Title: e.Title, Seed: e.Seed, About: e.About, Quick: opts.Quick, Reps: opts.Reps, Started: time.Now()}
		x := &Run{Options: opts, Res: res, progress: progress}
		if len(exps) > 1 {
			x.prefix = fmt.Sprintf("(%d/%d) ", i+1, len(exps))
		}
		err := e.run(x)
		res.Seconds = time.Since(res.Started).Seconds()
		out = append(out, res)
		if err != nil {
			err = fmt.Errorf("%s: %w", e.Name, err)
			res.Notes = append(res.Notes, "failed: "+err.Error())
			fmt.Fprintf(progress, "%s\n", err)
			if firstErr == nil {
				firstErr = err
			}
		}
		// Written after every experiment, so that a failure later keeps
		// what was measured.
		if werr := WriteResults(out, opts); werr != nil && firstErr == nil {
			firstErr = werr
		}
	}
	return out, firstErr
}

// ---- helpers the experiments share ----

// cluster brings up an emulated cluster for an experiment and waits until
// every node knows every other's load; stop tears it down.
func (x *Run) cluster(spec emu.Spec) (st emu.State, cl *api.Client, stop func(), err error) {
	spec.Roamd = x.tool("roamd")
	st, err = up(spec)
	if err != nil {
		if errors.Is(err, emu.ErrRunning) {
			return st, nil, nil, fmt.Errorf("%w (left by an earlier run, or one running now)", err)
		}
		return st, nil, nil, err
	}
	stop = func() { _ = down(spec.Name) }
	cl = api.NewClient(st.Nodes[0].Socket)
	if err = waitMembers(cl, spec.Nodes); err == nil {
		err = waitLoads(cl, spec.Nodes)
	}
	if err != nil {
		stop()
		return st, nil, nil, err
	}
	return st, cl, stop, nil
}

// start runs a request from the client's node (the home node).
func start(cl *api.Client, req api.RunRequest) ([]string, error) {
	if req.Count == 0 {
		req.Count = 1
	}
	req.Env, req.Cwd = os.Environ(), "/"
	var resp api.RunResponse
	err := cl.Do(context.Background(), http.MethodPost, api.PathRun, req, &resp)
	return resp.IDs, err
}

// waitJobs waits until every job is over and returns their records. It
// polls slowly (every 500 ms): a ps asks every node, and CPU is what the
// experiments measure.
func waitJobs(cl *api.Client, ids []string, limit time.Duration) ([]api.Job, error) {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	deadline := time.Now().Add(limit)
	for {
		var js []api.Job
		if err := cl.Get(api.PathPS+"?all=1", &js); err == nil {
			var mine []api.Job
			over := 0
			for _, j := range js {
				if want[j.ID] {
					mine = append(mine, j)
					if j.State == api.StateFinished || j.State == api.StateLost {
						over++
					}
				}
			}
			if over == len(ids) && len(mine) == len(ids) {
				sort.Slice(mine, func(a, b int) bool { return mine[a].ID < mine[b].ID })
				return mine, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("jobs %s not over after %s", strings.Join(ids, ","), limit)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// makespan is from the first start to the last end, in the home node's
// times, in seconds; it fails unless every job exited with 0.
func makespan(js []api.Job) (float64, error) {
	var first, last time.Time
	for _, j := range js {
		if j.ExitCode == nil || *j.ExitCode != 0 {
			code := "none"
			if j.ExitCode != nil {
				code = fmt.Sprint(*j.ExitCode)
			}
			return 0, fmt.Errorf("job %s (%s) ended with exit status %s", j.ID, j.Cmd, code)
		}
		if first.IsZero() || j.Started.Before(first) {
			first = j.Started
		}
		if j.Ended.After(last) {
			last = j.Ended
		}
	}
	return last.Sub(first).Seconds(), nil
}

var resultLine = regexp.MustCompile(`(?m)^([a-z]+): result=(\S+) cpu=([0-9.]+) elapsed=([0-9.]+)$`)

// workloadResult reads a finished job's closing line: its result.
func workloadResult(cl *api.Client, id string) (string, error) {
	var o api.Output
	if err := cl.Get(api.Fill(api.PathJobOutput, id), &o); err != nil {
		return "", fmt.Errorf("output of %s: %w", id, err)
	}
	m := resultLine.FindSubmatch(o.Stdout)
	if m == nil {
		return "", fmt.Errorf("job %s printed no result line (stdout %q, stderr %q)", id, tail(string(o.Stdout)), tail(string(o.Stderr)))
	}
	return string(m[2]), nil
}

func tail(s string) string {
	if len(s) > 200 {
		return "..." + s[len(s)-200:]
	}
	return s
}

// kill ends jobs (the background load) and waits until they are over.
func kill(cl *api.Client, ids []string) {
	if len(ids) == 0 {
		return
	}
	_ = cl.Do(context.Background(), http.MethodPost, api.PathKill, api.KillRequest{IDs: ids, Signal: 9}, nil)
	_, _ = waitJobs(cl, ids, 30*time.Second)
}

// waitIdle waits, up to 20 s, until this node has every live node's load
// in its load vector (a cluster just brought up has heard from some of
// them only: its first round would crowd the jobs onto those) and sees
// each under 0.5 (runnable processes per unit of capacity, smoothed): the
// jobs of the run before have left it, so that they do not steer this
// run's placement. It says so when the wait runs out, and goes on.
func (x *Run) waitIdle(cl *api.Client) {
	deadline := time.Now().Add(20 * time.Second)
	for {
		var ns []api.NodeInfo
		if cl.Get(api.PathNodes, &ns) == nil {
			busy := ""
			for _, n := range ns {
				switch {
				case n.Alive && n.Load == nil:
					busy = fmt.Sprintf("node %s not in the load vector", n.ID)
				case n.Alive && *n.Load >= 0.5:
					busy = fmt.Sprintf("node %s at %.2f", n.ID, *n.Load)
				}
			}
			if busy == "" {
				return
			}
			if time.Now().After(deadline) {
				x.note("cluster not idle after 20 s (%s); going on", busy)
				return
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
}
