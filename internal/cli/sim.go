//go:build !node

package cli

// roam sim: the simulator (package sim) from the command line, its
// results written to a directory: results.csv, results.json and
// report.md, a function of the flags alone (two runs with one seed give
// the same bytes), and cost.json, what the run cost the machine.

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"roam/internal/load"
	"roam/internal/sim"
)

// simHeapPerNode is the heap roam sim lets the collector keep a node.
const simHeapPerNode = 3584

// simSpec is roam sim's flags.
type simSpec struct {
	cfg        sim.Config
	vector     string
	workload   string
	util, mean float64
	shape      float64
	out        string
	smallPages bool // no huge pages asked for (hugePages): to measure what they give
	// progress: every this much simulated time, a line of what the run
	// has cost so far to progressOut; 0 none.
	progress    time.Duration
	progressOut io.Writer
}

func (e *env) simCmd() *cobra.Command {
	s := simSpec{cfg: sim.DefaultConfig()}
	c := jsonVia(jsonValue, &cobra.Command{
		Use:   "sim",
		Short: "simulate a cluster of up to millions of nodes running roam's own decisions",
		Long: `roam sim runs roam's load gossip, scheduling policies, admission and
placement, the agent's own code, on a simulated cluster: nodes, processes
sharing their CPUs, a network, migrations costed as roam bench migrate
measured them, and failures. It writes results.csv, results.json and
report.md to --out (the same bytes for the same flags and seed), and
cost.json (nodes, simulated and wall time, events a second, bytes a node).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s.progressOut = e.errOut
			cost, err := runSim(s)
			if err != nil {
				return err
			}
			if e.json {
				return e.printJSON(cost)
			}
			fmt.Fprintf(e.out, "%d nodes, %g simulated s in %.1f wall s: %.0f events/s, %.0f bytes a node; results in %s\n",
				cost.Nodes, cost.Seconds, cost.Wall, cost.EventsPerSec, cost.BytesPerNode, s.out)
			return nil
		},
	})
	f := c.Flags()
	f.IntVar(&s.cfg.Nodes, "nodes", s.cfg.Nodes, "nodes in the cluster")
	f.DurationVar(&s.cfg.Duration, "time", s.cfg.Duration, "simulated time")
	f.Int64Var(&s.cfg.Seed, "seed", s.cfg.Seed, "the random source's seed")
	f.StringVar(&s.cfg.Policy, "policy", s.cfg.Policy, `scheduling policy (roam policy's names; "" none)`)
	f.StringVar(&s.cfg.Placement, "placement", "", "placement instead of the policy's: least-loaded, random-two, round-robin, random")
	f.StringVar(&s.vector, "vector", string(load.PolicyFIFO), "load vector policy: fifo or beneficial")
	f.IntVar(&s.cfg.VectorSize, "vector-size", s.cfg.VectorSize, "load vector entries")
	f.DurationVar(&s.cfg.Interval, "interval", s.cfg.Interval, "how often each node gossips its load (the age of what placement knows grows with it)")
	f.StringVar(&s.workload, "workload", "poisson", "poisson, or an SWF trace file")
	f.Float64Var(&s.util, "util", 0.7, "poisson: mean utilization of the cluster's CPU (0..1)")
	f.Float64Var(&s.mean, "mean-length", 60, "poisson: mean job length, CPU seconds")
	f.Float64Var(&s.shape, "shape", 1.5, "poisson: the Pareto law's shape (> 1; 0: exponential)")
	f.IntVar(&s.cfg.Failures, "failures", 0, "nodes that die during the run")
	f.StringVar(&s.out, "out", "sim-results", "directory for the results")
	f.DurationVar(&s.progress, "progress", 0, "every this much simulated time, print what the run has cost so far (wall and CPU time, events, memory) to stderr")
	f.BoolVar(&s.smallPages, "small-pages", false, "do not ask the kernel for huge pages for the simulation's memory")
	c.AddCommand(e.simLVMCmd())
	return c
}

// runSim runs the simulation s describes and writes its files.
func runSim(s simSpec) (sim.Cost, error) {
	c := s.cfg
	c.VectorPolicy = load.Policy(s.vector)
	switch {
	case s.workload == "poisson":
		if !(s.util > 0 && s.util <= 1) || !(s.mean > 0) || s.shape < 0 || s.shape > 0 && s.shape <= 1 {
			return sim.Cost{}, fmt.Errorf("--util %v, --mean-length %v, --shape %v: want (0, 1], > 0, and 0 or > 1", s.util, s.mean, s.shape)
		}
		c.Workload = &sim.Poisson{Utilization: s.util, MeanLength: s.mean, Shape: s.shape}
	default:
		f, err := os.Open(s.workload)
		if err != nil {
			return sim.Cost{}, fmt.Errorf("--workload: %w", err)
		}
		jobs, err := sim.ReadSWF(f)
		f.Close()
		if err != nil {
			return sim.Cost{}, fmt.Errorf("--workload %s: %w", s.workload, err)
		}
		c.Workload = &sim.Trace{Jobs: jobs}
	}
	run, err := sim.New(c)
	if err != nil {
		return sim.Cost{}, err // it names the field
	}
	if err := os.MkdirAll(s.out, 0o755); err != nil {
		return sim.Cost{}, err
	}
	// The collector keeps the heap under 3.5 KB a node (64 MiB at
	// least), so that the process stays under the 4 KB a node,
	// its runtime and binary counted: by default it lets the heap grow to
	// twice what is live, which at 100,000 nodes passed 4 KB.
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(max(int64(c.Nodes)*simHeapPerNode, 64<<20)))
	if !s.smallPages {
		hugePages()
	}
	begin := time.Now()
	runSteps(run, s.progress, c.Duration, begin, s.progressOut)
	res := run.Run()
	wall := time.Since(begin)
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	cost := run.CostOf(wall, ms.HeapAlloc, uint64(ru.Maxrss)<<10)
	runtime.KeepAlive(run)
	for name, b := range map[string][]byte{"results.csv": res.CSV(), "results.json": res.JSON(), "report.md": res.Report(), "cost.json": cost.JSON()} {
		if err := os.WriteFile(filepath.Join(s.out, name), b, 0o644); err != nil {
			return cost, err
		}
	}
	return cost, nil
}

// runSteps runs run to its end in steps of every simulated time, after
// each a line to out: simulated, wall and CPU seconds so far, events,
// peak resident memory. The CPU seconds between two lines are what a
// stretch of simulated time cost, its start's warm-up left out.
func runSteps(run *sim.Sim, every, end time.Duration, begin time.Time, out io.Writer) {
	if every <= 0 {
		return
	}
	for at := every; at < end+every; at += every {
		run.RunTo(min(at, end))
		var ru syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		fmt.Fprintf(out, "roam sim: %.0f simulated s, %.1f wall s, %.1f user s, %.1f system s, %d events, peak RSS %d MiB\n",
			run.Now().Seconds(), time.Since(begin).Seconds(), tv(ru.Utime), tv(ru.Stime), run.Events(), ru.Maxrss>>10)
	}
}

func tv(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
