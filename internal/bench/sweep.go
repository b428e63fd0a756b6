package bench

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"math/rand"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"roam/internal/api"
	"roam/internal/cgroup"
	"roam/internal/emu"
	"roam/internal/sched"
)

// The sweep benchmark (issue 43, "A benchmark that is a real sweep"):
// one user's sweep of jobs of heavy-tailed lengths, submitted at once, on
// make demo's heterogeneous nodes with seed 002's background load on node
// 2; roam's queue with migration against the same queue with static
// placement. Its parameters are fixed here and printed in the report;
// the rounds are --reps.
const (
	// sweepSeed draws the jobs' lengths and memory classes: every run
	// gives every index the same job.
	sweepSeed = 43
	// sweepAlpha is the lengths' Pareto shape, between the sweep's least
	// and most CPU-seconds (Harchol-Balter and Downey's heavy tail of
	// process lifetimes: α near 1).
	sweepAlpha = 1.1
	// sweepMemReq is every job's --mem: roam run takes one request for a
	// sweep, so the sweep asks what its largest class holds.
	sweepMemReq = "256M"
	// sweepTouch is the share of its class a job touches: the rest is
	// headroom under its cgroup's memory.max for the program itself.
	sweepTouch = 7.0 / 8
	// sweepBgProcs and sweepBgMax are seed 002 §4.3's background load on
	// node 2: 4 processes, each busy and idle in turn for random 0–5 s.
	sweepBgProcs = 4
	sweepBgMax   = 5.0
	// sweepTarget and sweepMakespanTarget are issue 43's: roam's mean
	// slowdown at most two thirds of static placement's, its makespan at
	// most 1.15 times the ideal.
	sweepTarget         = 2.0 / 3
	sweepMakespanTarget = 1.15
	// sweepPoll is how often a side's peak memory is sampled.
	sweepPoll = 250 * time.Millisecond
)

// sweepCPU is make demo's cluster (scripts/demo.sh); sweepMemMB gives
// each node memory in proportion to its CPU, as a cluster's slots are:
// 8, 4, 4 and 2 jobs of sweepMemReq, 18 of the sweep at once.
var (
	sweepCPU     = []float64{0.8, 0.4, 0.4, 0.2}
	sweepMemMB   = []int{2048, 1024, 1024, 512}
	sweepClasses = []int{32, 64, 256} // MiB
)

// sweepSize is one size of the sweep: the full one, or --quick's.
type sweepSize struct {
	jobs           int
	minCPU, maxCPU float64       // CPU-seconds
	limit          time.Duration // a side's longest run; a round is two
	bins           []float64     // the slowdown table's bins, by their upper bounds
}

var (
	sweepFull  = sweepSize{jobs: 600, minCPU: 0.2, maxCPU: 20, limit: 10 * time.Minute, bins: []float64{0.5, 1, 2, 5, 20}}
	sweepQuick = sweepSize{jobs: 48, minCPU: 0.2, maxCPU: 4, limit: 2 * time.Minute, bins: []float64{0.5, 1, 4}}
)

// sweepJob is one index of the sweep: its CPU-seconds and the MiB of its
// class.
type sweepJob struct {
	cpu float64
	mib int
}

// sweepJobs draws the sweep: lengths from the Pareto distribution of
// shape sweepAlpha truncated to [minCPU, maxCPU] (inverse transform), in
// hundredths of a second, and a class each, uniformly.
func sweepJobs(s sweepSize) []sweepJob {
	rng := rand.New(rand.NewSource(sweepSeed))
	ratio := math.Pow(s.minCPU/s.maxCPU, sweepAlpha)
	out := make([]sweepJob, s.jobs)
	for i := range out {
		u := rng.Float64()
		x := s.minCPU / math.Pow(1-u*(1-ratio), 1/sweepAlpha)
		out[i] = sweepJob{cpu: math.Min(s.maxCPU, math.Max(s.minCPU, math.Round(x*100)/100)), mib: sweepClasses[rng.Intn(len(sweepClasses))]}
	}
	return out
}

var expSweep = &Experiment{
	Name:  "sweep",
	Title: "A user's sweep of heavy-tailed jobs: roam's queue and migration against the same queue with static placement",
	Seed:  "issue 43 (a real sweep); Harchol-Balter and Downey (migration against placement alone on heavy-tailed lifetimes); seed 002 §4.3 (the background load)",
	About: "A non-root user (uid 70001) submits one sweep, `roam run -d --args-from FILE --mem 256M -- sweepjob {}`, on node 1 of make demo's cluster (0.8, 0.4, 0.4 and 0.2 CPUs), whose nodes have memory for a fraction of it at once; node 2 carries seed 002's background load. Index i's line gives its CPU-seconds, drawn from a Pareto distribution with a fixed seed, and the MiB it holds (of 32, 64 or 256). The home's queue holds what has no room and releases it as room appears. The same sweep runs under the default policy (mosix: least-loaded placement, then migration) and under static (round-robin placement, never moving: a job array's or GNU parallel's, with slots of memory by capacity), in interleaved rounds, one cluster. A job's slowdown is (its end − the sweep's submission) / its CPU-seconds (on one full CPU); the report gives their mean and 99th percentile, the makespan from the submission against the ideal (the CPU the jobs used, from their accounting, over the 1.8 CPUs; the background's not counted), the peak memory of every node (sampled), and the slowdown by job length, split into the wait in the queue and the run.",
	run:   runSweep,
}

func runSweep(x *Run) error {
	size := pick(x, sweepQuick, sweepFull)
	jobs := sweepJobs(size)
	r := x.Res
	r.XLabel = "CPU-s a job, up to"
	r.Pivot = []string{"mean slowdown in the bin", "mean stretch in the bin", "jobs in the bin"}
	r.Notes = append(r.Notes, "load average (1, 5, 15 min) before: "+loadAvg())
	defer func() { r.Notes = append(r.Notes, "load average after: "+loadAvg()) }()
	asked := 0.0
	for _, j := range jobs {
		asked += j.cpu
	}
	r.Setup = fmt.Sprintf("4 nodes of %v CPU and %v MiB; one sweep of %d jobs by uid %d on node 1, `roam run -d --args-from FILE --mem %s -- sweepjob {}`: CPU lengths Pareto α = %g between %g and %g CPU-seconds (seed %d; %.1f CPU-seconds in all, median %.2f), memory classes %v MiB drawn uniformly, each job touching %.0f %% of its class; background: %d processes busy/idle for random 0–%g s on node 2, pinned, from before the submission to the side's end; policies: the default (%s) and static; %d rounds, each side at most %s.",
		sweepCPU, sweepMemMB, size.jobs, BenchUser.UID, sweepMemReq, sweepAlpha, size.minCPU, size.maxCPU, sweepSeed, asked, sweepMedian(jobs), sweepClasses, sweepTouch*100,
		sweepBgProcs, sweepBgMax, sched.DefaultPolicy, x.Reps, size.limit)
	r.Charts = []Chart{
		{File: "sweep-slowdown.png", Title: "Mean slowdown by job length", Metric: "mean slowdown in the bin", XLabel: "CPU-s a job, up to", YLabel: "slowdown"},
		{File: "sweep-stretch.png", Title: "Mean stretch (run time / length) by job length", Metric: "mean stretch in the bin", XLabel: "CPU-s a job, up to", YLabel: "stretch"},
	}
	args, cleanup, err := sweepArgs(jobs)
	if err != nil {
		return err
	}
	defer cleanup()
	sides := []struct{ series, text string }{
		{"roam", sched.Builtin[sched.DefaultPolicy]},
		{"static", sched.Builtin["static"]},
	}
	spec := emu.Spec{Name: "bsweep", Nodes: len(sweepCPU), CPU: sweepCPU, MemMB: sweepMemMB, Subnet: "198.18.103.0/24"}
	return withCluster(x, spec, func(st emu.State, cl *api.Client) error {
		x.plan(len(sides) * x.Reps)
		for round := 1; round <= x.Reps; round++ {
			slow := map[string]float64{}
			for i := range sides {
				// Each round the other first: what the machine does
				// meanwhile weighs on both alike.
				s := sides[(i+round+1)%len(sides)]
				x.step("round %d: %s, %d jobs", round, s.series, size.jobs)
				if err := loadPolicy(cl, s.text); err != nil {
					return err
				}
				x.waitIdle(cl)
				o, err := sweepSide(x, st, cl, args, jobs, size, round)
				if err != nil {
					return fmt.Errorf("round %d, %s: %w", round, s.series, err)
				}
				o.add(r, s.series, size)
				if m := o.moves(); m != "" {
					r.Notes = append(r.Notes, fmt.Sprintf("round %d, %s: %s", round, s.series, m))
				}
				slow[s.series] = o.meanSlowdown()
			}
			r.Add("roam / static", size.maxCPU, "mean slowdown", "ratio", slow["roam"]/slow["static"])
		}
		sweepTargets(r, size)
		return nil
	})
}

// sweepMedian is the median CPU length of jobs.
func sweepMedian(jobs []sweepJob) float64 {
	v := make([]float64, len(jobs))
	for i, j := range jobs {
		v[i] = j.cpu
	}
	slices.Sort(v)
	return (v[(len(v)-1)/2] + v[len(v)/2]) / 2
}

// sweepArgs writes the --args-from file, a line an index ("SECONDS MIB",
// the MiB the job touches), where the user who submits can read it.
func sweepArgs(jobs []sweepJob) (string, func(), error) {
	dir, err := os.MkdirTemp("", "roam-bench-sweep-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	var b strings.Builder
	for _, j := range jobs {
		fmt.Fprintf(&b, "%.2f %d\n", j.cpu, int(float64(j.mib)*sweepTouch))
	}
	path := filepath.Join(dir, "args")
	err = os.WriteFile(path, []byte(b.String()), 0o644)
	if err == nil {
		err = os.Chmod(dir, 0o755)
	}
	if err != nil {
		cleanup()
		return "", nil, err
	}
	return path, cleanup, nil
}

// sweepOutcome is one side's run: the submission's time, the jobs'
// records by index, and every node's peak memory.
type sweepOutcome struct {
	t0     time.Time
	jobs   []sweepJob
	recs   []api.Job
	peakMB []float64
	// busy is the CPU-seconds the machine was busy from the submission
	// to the last end, or taken by the VM's host (busyCPU).
	busy float64
}

// sweepSide runs the sweep once under the policy loaded: the background
// load on node 2, the user's submission, the wait for every job's end
// while every node's memory is sampled; then the user's records are
// purged and the nodes left to remove their groups.
func sweepSide(x *Run, st emu.State, cl *api.Client, args string, jobs []sweepJob, size sweepSize, round int) (sweepOutcome, error) {
	o := sweepOutcome{jobs: jobs}
	bg, err := start(cl, api.RunRequest{Argv: []string{x.tool("bgload"), strconv.Itoa(sweepBgProcs), fmt.Sprint(sweepBgMax), fmt.Sprint(size.limit.Seconds()), strconv.Itoa(round)}, On: "2", Pin: true})
	if err != nil {
		return o, fmt.Errorf("background load: %w", err)
	}
	peaks := sampleMemory(st)
	busy0 := busyCPU()
	ids, t0, err := sweepSubmit(x, st, args, len(jobs))
	if err == nil {
		o.t0 = t0
		o.recs, err = sweepWait(cl, ids, len(jobs), t0.Add(size.limit))
		// Read at the wait's end, up to a second after the last end.
		o.busy = busyCPU() - busy0
	}
	o.peakMB = peaks()
	kill(cl, bg)
	if err != nil {
		kill(cl, ids)
	}
	uid := BenchUser.UID
	if perr := cl.Do(context.Background(), http.MethodPost, api.PathPurge, api.PurgeRequest{UID: &uid}, nil); perr != nil && err == nil {
		err = fmt.Errorf("purge: %w", perr)
	}
	settle(x, st)
	return o, err
}

// sweepSubmit is the user's roam run of the sweep, detached; it returns
// the jobs' ids and the time of the submission.
func sweepSubmit(x *Run, st emu.State, args string, n int) ([]string, time.Time, error) {
	cmd := exec.Command(x.tool("roam"), "--socket", st.Nodes[0].Socket, "run", "-d", "--args-from", args, "--mem", sweepMemReq, "--", x.tool("sweepjob"), "{}")
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: BenchUser.UID, Gid: BenchUser.GID, Groups: BenchUser.Groups}}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		return nil, t0, fmt.Errorf("roam run: %v: %s", err, strings.TrimSpace(errb.String()))
	}
	ids := strings.Fields(out.String())
	if len(ids) != n {
		return ids, t0, fmt.Errorf("roam run printed %d job ids, not %d", len(ids), n)
	}
	return ids, t0, nil
}

// sweepWait waits until every job of the sweep is over, and returns
// their records by index; every one must have ended with 0 as the user.
// It polls every second: a ps asks every node for hundreds of records.
func sweepWait(cl *api.Client, ids []string, n int, deadline time.Time) ([]api.Job, error) {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for {
		var js []api.Job
		over, left := 0, ""
		if err := cl.Get(api.PathPS+"?all=1", &js); err == nil {
			recs := make([]api.Job, n)
			for _, j := range js {
				if !want[j.ID] || j.Index == nil || *j.Index < 0 || *j.Index >= n {
					continue
				}
				recs[*j.Index] = j
				if j.State == api.StateFinished || j.State == api.StateLost {
					over++
				} else if left == "" {
					left = fmt.Sprintf("job %s (index %d) %s", j.ID, *j.Index, j.State)
				}
			}
			if over == n {
				return recs, sweepStatus(recs)
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d jobs not over at the side's limit (%s, ...)", n-over, n, left)
		}
		time.Sleep(time.Second)
	}
}

// sweepStatus fails unless every job ran as the user and ended with 0.
func sweepStatus(recs []api.Job) error {
	for i, j := range recs {
		if j.ExitCode == nil || *j.ExitCode != 0 || j.UID != BenchUser.UID {
			code := "no status"
			if j.ExitCode != nil {
				code = "status " + strconv.Itoa(*j.ExitCode)
			}
			return fmt.Errorf("index %d, job %s of uid %d: %s, %s (%s), not status 0 as uid %d", i, j.ID, j.UID, j.State, code, j.EndReason, BenchUser.UID)
		}
	}
	return nil
}

// sampleMemory samples every node's memory (its cgroup's usage, which
// the node's memory bounds) until the returned func is called, which
// returns each node's peak in MiB.
func sampleMemory(st emu.State) func() []float64 {
	peak := make([]float64, len(st.Nodes))
	l, err := cgroup.Detect()
	if err != nil {
		return func() []float64 { return peak }
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(sweepPoll)
		defer t.Stop()
		for {
			for i, nd := range st.Nodes {
				peak[i] = math.Max(peak[i], l.MemoryUsageMB(nd.Cgroup))
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() []float64 {
		close(done)
		wg.Wait()
		return peak
	}
}

// slowdown is index i's: (its end − the submission) / its CPU-seconds.
func (o sweepOutcome) slowdown(i int) float64 {
	return o.recs[i].Ended.Sub(o.t0).Seconds() / o.jobs[i].cpu
}

// stretch is index i's run alone: (its end − its start) / its
// CPU-seconds; its slowdown less its wait in the queue over its length.
func (o sweepOutcome) stretch(i int) float64 {
	return o.recs[i].Ended.Sub(o.recs[i].Started).Seconds() / o.jobs[i].cpu
}

func (o sweepOutcome) meanSlowdown() float64 {
	s := 0.0
	for i := range o.recs {
		s += o.slowdown(i)
	}
	return s / float64(len(o.recs))
}

// add records the side's measures under series.
func (o sweepOutcome) add(r *Result, series string, size sweepSize) {
	x := size.maxCPU
	n := len(o.recs)
	slow := make([]float64, n)
	var stretch, used, asked, ran float64
	var end time.Time
	moves := 0
	for i, j := range o.recs {
		slow[i] = o.slowdown(i)
		stretch += o.stretch(i)
		used += j.CPUSeconds
		asked += o.jobs[i].cpu
		moves += j.Migrations
		ran += j.Ended.Sub(j.Started).Seconds()
		if j.Ended.After(end) {
			end = j.Ended
		}
	}
	ideal := used / capacitySum(sweepCaps())
	makespan := end.Sub(o.t0).Seconds()
	mean := o.meanSlowdown()
	sorted := slices.Sorted(slices.Values(slow))
	r.Add(series, x, "mean slowdown", "", mean)
	r.Add(series, x, "p99 slowdown", "", sorted[int(math.Ceil(0.99*float64(n)))-1])
	r.Add(series, x, "mean stretch", "", stretch/float64(n))
	r.Add(series, x, "makespan", "s", makespan)
	r.Add(series, x, "ideal", "s", ideal)
	r.Add(series, x, "makespan / ideal", "×", makespan/ideal)
	r.Add(series, x, "CPU used / asked", "", used/asked)
	r.Add(series, x, "migrations", "", float64(moves))
	r.Add(series, x, "most running at once", "", float64(mostRunning(o.recs)))
	// How full the queue kept the nodes, and what CPU the jobs had:
	// what the machine did besides (the agents, the background, anything
	// else running on it) is what they did not get.
	r.Add(series, x, "mean running", "", ran/makespan)
	r.Add(series, x, "CPUs the jobs got", "CPUs", used/makespan)
	r.Add(series, x, "other CPUs busy", "CPUs", (o.busy-used)/makespan)
	for i, p := range o.peakMB {
		r.Add(series, x, fmt.Sprintf("peak memory, node %d", i+1), "MiB", p)
	}
	o.addBins(r, series, size, slow)
}

// addBins records the side's mean slowdown and stretch by job length,
// in size's bins.
func (o sweepOutcome) addBins(r *Result, series string, size sweepSize, slow []float64) {
	lo := 0.0
	for _, hi := range size.bins {
		var sl, st float64
		k := 0
		for i, j := range o.jobs {
			if j.cpu > lo && j.cpu <= hi {
				sl += slow[i]
				st += o.stretch(i)
				k++
			}
		}
		if k > 0 {
			r.Add(series, hi, "mean slowdown in the bin", "", sl/float64(k))
			r.Add(series, hi, "mean stretch in the bin", "", st/float64(k))
			r.Add(series, hi, "jobs in the bin", "", float64(k))
		}
		lo = hi
	}
}

// sweepCaps are the nodes' capacities by id.
func sweepCaps() map[string]float64 {
	caps := map[string]float64{}
	for i, c := range sweepCPU {
		caps[strconv.Itoa(i+1)] = c
	}
	return caps
}

// mostRunning is the most jobs that ran at once, from their records'
// starts and ends.
func mostRunning(recs []api.Job) int {
	type ev struct {
		at time.Time
		d  int
	}
	evs := make([]ev, 0, 2*len(recs))
	for _, j := range recs {
		evs = append(evs, ev{j.Started, 1}, ev{j.Ended, -1})
	}
	// An end before a start at the same instant: the room passed on.
	sort.Slice(evs, func(a, b int) bool {
		if !evs[a].at.Equal(evs[b].at) {
			return evs[a].at.Before(evs[b].at)
		}
		return evs[a].d < evs[b].d
	})
	most, now := 0, 0
	for _, e := range evs {
		now += e.d
		most = max(most, now)
	}
	return most
}

// sweepTargets notes the rounds against issue 43's targets, as the other
// experiments note theirs (a check is what holds on any machine), and
// checks the jobs' accounting: the CPU they used is what they were
// asked to burn.
func sweepTargets(r *Result, size sweepSize) {
	x := size.maxCPU
	met := map[bool]string{true: "met", false: "not met"}
	if ratio := r.Get("roam / static", x, "mean slowdown"); ratio != nil {
		r.Notes = append(r.Notes, fmt.Sprintf("target roam's mean slowdown ≤ 2/3 of static placement's, in the same round: %s (ratio %.2f; rounds %s)",
			met[ratio.Mean <= sweepTarget], ratio.Mean, strings.Join(rounded(ratio.Values), ", ")))
	}
	if m := r.Get("roam", x, "makespan / ideal"); m != nil {
		r.Notes = append(r.Notes, fmt.Sprintf("target roam's makespan ≤ %.2f × the ideal: %s (mean %.2f; rounds %s)",
			sweepMakespanTarget, met[m.Mean <= sweepMakespanTarget], m.Mean, strings.Join(rounded(m.Values), ", ")))
	}
	for _, s := range []string{"roam", "static"} {
		if m := r.Get(s, x, "CPU used / asked"); m != nil {
			lo, hi := slices.Min(m.Values), slices.Max(m.Values)
			r.Check(s+": the jobs' accounted CPU is 0.95 to 1.10 times what they were asked to burn", lo >= 0.95 && hi <= 1.1, "used / asked %.3f to %.3f", lo, hi)
		}
	}
}

// moves says where the side's jobs moved: how many moves, by source and
// destination, how many failed, and when, from the submission; "" with
// none.
func (o sweepOutcome) moves() string {
	pairs := map[string]int{}
	var keys []string
	failed, n := 0, 0
	first, last, frozen := math.Inf(1), 0.0, 0.0
	for _, j := range o.recs {
		for _, m := range j.MigrationLog {
			n++
			if !m.OK {
				failed++
			}
			frozen += m.FreezeMS / 1000
			k := m.From + "→" + m.To
			if pairs[k] == 0 {
				keys = append(keys, k)
			}
			pairs[k]++
			at := m.At.Sub(o.t0).Seconds()
			first, last = math.Min(first, at), math.Max(last, at)
		}
	}
	if n == 0 {
		return ""
	}
	slices.Sort(keys)
	by := make([]string, len(keys))
	for i, k := range keys {
		by[i] = fmt.Sprintf("%s %d", k, pairs[k])
	}
	return fmt.Sprintf("%d moves (%d failed): %s; the first %.0f s, the last %.0f s after the submission; %.1f s frozen in all", n, failed, strings.Join(by, ", "), first, last, frozen)
}
