package bench

import (
	"fmt"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"roam/internal/api"
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
	// sweepMem is the sweep's --mem: each index asks its class, the third
	// word of its --args-from line.
	sweepMem = "{3}M"
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
// 8, 4, 4 and 2 jobs of the largest class, 18 at once, and some 39 of the
// sweep's mean request (117 MiB).
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
	sweepFull  = sweepSize{jobs: 600, minCPU: 0.2, maxCPU: 20, limit: 30 * time.Minute, bins: []float64{0.5, 1, 2, 5, 20}}
	sweepQuick = sweepSize{jobs: 48, minCPU: 0.2, maxCPU: 4, limit: 4 * time.Minute, bins: []float64{0.5, 1, 4}}
)

// sweepJob is one index of the sweep: its CPU-seconds and the MiB of its
// class.
type sweepJob struct {
	cpu float64
	mib int
}

// sweepJobs draws the sweep: lengths by sweepLength, and a class each,
// uniformly.
func sweepJobs(s sweepSize) []sweepJob {
	rng := rand.New(rand.NewSource(sweepSeed))
	out := make([]sweepJob, s.jobs)
	for i := range out {
		out[i] = sweepJob{cpu: sweepLength(rng.Float64(), s.minCPU, s.maxCPU), mib: sweepClasses[rng.Intn(len(sweepClasses))]}
	}
	return out
}

// sweepLength is the length u (uniform in [0, 1)) draws from the Pareto
// distribution of shape sweepAlpha truncated to [lo, hi] (inverse
// transform), in hundredths of a second.
func sweepLength(u, lo, hi float64) float64 {
	ratio := math.Pow(lo/hi, sweepAlpha)
	x := lo / math.Pow(1-u*(1-ratio), 1/sweepAlpha)
	return math.Min(hi, math.Max(lo, math.Round(x*100)/100))
}

var expSweep = &Experiment{
	Name:  "sweep",
	Title: "A user's sweep of heavy-tailed jobs: roam's queue and migration against the same queue with static placement",
	Seed:  "issue 43 (a real sweep); Harchol-Balter and Downey (migration against placement alone on heavy-tailed lifetimes); seed 002 §4.3 (the background load)",
	About: "A non-root user (uid 70001) submits one sweep, `roam run -d --args-from FILE --mem {3}M -- sweepjob {1} {2}`, on node 1 of make demo's cluster (0.8, 0.4, 0.4 and 0.2 CPUs), whose nodes have memory for a fraction of it at once; node 2 carries seed 002's background load. Index i's line gives its CPU-seconds, drawn from a Pareto distribution with a fixed seed, the MiB it holds, and its memory class (32, 64 or 256 MiB), its --mem. The home's queue holds what has no room and releases it as room appears. The same sweep runs under the default policy (mosix: least-loaded placement, then migration) and under static (round-robin placement, never moving: a job array's or GNU parallel's, with slots of memory by capacity), in interleaved rounds, one cluster. A job's slowdown is (its end − the sweep's submission) / its CPU-seconds (on one full CPU); the report gives their mean and 99th percentile, the makespan from the submission against the ideal (the CPU the jobs used, from their accounting, over the 1.8 CPUs; the background's not counted), the peak memory of every node (sampled), and the slowdown by job length, split into the wait in the queue and the run.",
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
	r.Setup = fmt.Sprintf("4 nodes of %v CPU and %v MiB; one sweep of %d jobs by uid %d on node 1, `roam run -d --args-from FILE --mem %s -- sweepjob {1} {2}`: CPU lengths Pareto α = %g between %g and %g CPU-seconds (seed %d; %.1f CPU-seconds in all, median %.2f), memory classes (each job's --mem) %v MiB drawn uniformly, each job touching %.0f %% of its class; background: %d processes busy/idle for random 0–%g s on node 2, pinned, from before the submission to the side's end; policies: the default (%s) and static; %d rounds, each side at most %s.",
		sweepCPU, sweepMemMB, size.jobs, BenchUser.UID, sweepMem, sweepAlpha, size.minCPU, size.maxCPU, sweepSeed, asked, sweepMedian(jobs), sweepClasses, sweepTouch*100,
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
				for _, m := range []string{o.moves(), o.preemptions()} {
					if m != "" {
						r.Notes = append(r.Notes, fmt.Sprintf("round %d, %s: %s", round, s.series, m))
					}
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

// sweepArgs writes the --args-from file, a line an index ("SECONDS MIB
// CLASS": the MiB the job touches, and its class, its --mem in MiB),
// where the user who submits can read it.
func sweepArgs(jobs []sweepJob) (string, func(), error) {
	dir, err := os.MkdirTemp("", "roam-bench-sweep-")
	if err != nil {
		return "", nil, err
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	var b strings.Builder
	for _, j := range jobs {
		fmt.Fprintf(&b, "%.2f %d %d\n", j.cpu, int(float64(j.mib)*sweepTouch), j.mib)
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
