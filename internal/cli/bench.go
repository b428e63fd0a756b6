//go:build !node

package cli

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"roam/internal/bench"
)

// downOnSignal makes a SIGINT or SIGTERM take the benchmark's clusters
// down (bench.TearDown) and exit with 128 + the signal.
func downOnSignal() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sigs
		names := bench.TearDown()
		fmt.Fprintf(os.Stderr, "roam bench: %v: took down %d cluster(s) %v\n", s, len(names), names)
		os.Exit(128 + int(s.(syscall.Signal)))
	}()
}

func (e *env) benchCmd() *cobra.Command {
	c := &cobra.Command{Use: "bench", Short: "run a benchmark on an emulated cluster it brings up and tears down",
		// Stopped by SIGINT or SIGTERM, a benchmark takes its clusters
		// down before it exits (128 + the signal), as it does when it ends.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := e.checkJSON(cmd); err != nil { // root's hook does not run under this one
				return err
			}
			downOnSignal()
			return nil
		}}
	spec := bench.AgentCostSpec{}
	ac := &cobra.Command{
		Use:   "agent-cost",
		Short: "CPU use per agent and bytes on the wire per node, idle cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec.Roamd = roamdPath()
			res, err := bench.AgentCost(spec, os.Stderr)
			if err != nil {
				return err
			}
			if e.json {
				return e.printJSON(res)
			}
			tw := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NODE\tCPU % OF A CORE\tSENT B/s\tRECEIVED B/s")
			var cpu, tx, maxCPU, maxTx float64
			for _, r := range res {
				fmt.Fprintf(tw, "%s\t%.3f\t%.0f\t%.0f\n", r.ID, r.CPUPercent, r.TxBytesSec, r.RxBytesSec)
				cpu += r.CPUPercent
				tx += r.TxBytesSec
				maxCPU = max(maxCPU, r.CPUPercent)
				maxTx = max(maxTx, r.TxBytesSec)
			}
			n := float64(len(res))
			fmt.Fprintf(tw, "mean\t%.3f\t%.0f\t\n", cpu/n, tx/n)
			fmt.Fprintf(tw, "max\t%.3f\t%.0f\t\n", maxCPU, maxTx)
			_ = tw.Flush()
			verdict := func(ok bool) string {
				if ok {
					return "met"
				}
				return "NOT met"
			}
			fmt.Fprintf(e.out, "target: CPU < 1 %% of a core per agent: %s (max %.3f %%); < 2 KB/s per node: %s (max %.0f B/s)\n",
				verdict(maxCPU < 1), maxCPU, verdict(maxTx < 2000), maxTx)
			return nil
		},
	}
	ac.Flags().IntVar(&spec.Nodes, "nodes", 8, "number of nodes")
	ac.Flags().DurationVar(&spec.Duration, "duration", 30*time.Second, "measuring window")
	ac.Flags().DurationVar(&spec.Interval, "interval", time.Second, "load dissemination interval")
	ac.Flags().StringVar(&spec.Subnet, "subnet", "198.18.100.0/24", "the benchmark cluster's /24")
	var bs bench.BalanceSpec
	var cpus, policies string
	var bothBg, withTimeline bool
	bal := &cobra.Command{
		Use:   "balance",
		Short: "makespan of equal CPU jobs started on the slowest node: balance vs static vs the ideal, same run",
		Long: `Brings up a heterogeneous cluster (--cpu), starts --jobs processes of --work
CPU-seconds each on the last (slowest) node, and measures the makespan under
each policy, one fresh cluster per policy, next to the ideal (the CPU time
the jobs measured themselves / total capacity), then again with jobs of
--short CPU-seconds, and the time until no node ran more than its share.
static places round-robin (its own placement). With
--background, node 2 also carries seed 002's background load (4 processes
cycling busy/idle for random 0..5 s); --both runs without and with it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			bs.CPU = nil
			for _, f := range strings.Split(cpus, ",") {
				v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
				if err != nil || v <= 0 {
					return fmt.Errorf("--cpu: %q is not a capacity in cores", f)
				}
				bs.CPU = append(bs.CPU, v)
			}
			if bs.Jobs < 1 || bs.Work <= 0 {
				return fmt.Errorf("--jobs and --work must be positive")
			}
			if bs.ShortWork < 0 {
				return fmt.Errorf("--short %g: must be 0 (no short run) or positive", bs.ShortWork)
			}
			bs.Policies = strings.Split(policies, ",")
			bs.Roamd = roamdPath()
			dir := filepath.Dir(bs.Roamd)
			bs.Burn, bs.BgLoad = filepath.Join(dir, "burn"), filepath.Join(dir, "bgload")
			for _, w := range []string{bs.Burn, bs.BgLoad} {
				if _, err := os.Stat(w); err != nil {
					return fmt.Errorf("workload %s is missing (make build makes it)", w)
				}
			}
			bs.Name, bs.On, bs.BgMaxSec = "bbal", strconv.Itoa(len(bs.CPU)), 5
			var all []bench.BalancePoint
			bgs := []bool{bs.Background}
			if bothBg {
				bgs = []bool{false, true}
			}
			for _, bg := range bgs {
				bs.Background = bg
				ps, err := bench.Balance(bs, os.Stderr)
				all = append(all, ps...)
				if err != nil {
					return err
				}
			}
			if e.json {
				return e.printJSON(all)
			}
			fmt.Fprint(e.out, bench.FormatBalance(all))
			if withTimeline {
				for _, p := range all {
					fmt.Fprintf(e.out, "\n%s%s:\n", p.Policy, map[bool]string{true: ", background load"}[p.Background])
					for _, l := range p.Timeline {
						fmt.Fprintln(e.out, "  "+l)
					}
				}
			}
			return nil
		},
	}
	bal.Flags().StringVar(&cpus, "cpu", "0.8,0.4,0.4,0.2", "CPU capacity per node")
	bal.Flags().IntVar(&bs.Jobs, "jobs", 12, "number of jobs")
	bal.Flags().Float64Var(&bs.Work, "work", 8, "CPU-seconds per job")
	bal.Flags().Float64Var(&bs.ShortWork, "short", 2, "also run each policy with jobs of this many CPU-seconds, in the same run (0: not)")
	bal.Flags().StringVar(&policies, "policies", "balance,static", "policies to compare, one run each")
	bal.Flags().BoolVar(&bs.Background, "background", false, "background load on node 2")
	bal.Flags().BoolVar(&bothBg, "both", false, "run without and with the background load")
	bal.Flags().StringVar(&bs.Subnet, "subnet", "198.18.103.0/24", "the benchmark cluster's /24")
	bal.Flags().BoolVar(&withTimeline, "timeline", false, "also print each run job by job, with every scheduling event")
	rewrite := &cobra.Command{
		Use:   "report DIR",
		Short: "write the CSV, charts and report of a run again from its results.json",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := bench.Rewrite(args[0]); err != nil {
				return err
			}
			report := filepath.Join(args[0], "report.md")
			return e.result(map[string]string{"report": report}, func() error {
				_, err := fmt.Fprintf(e.out, "report: %s\n", report)
				return err
			})
		},
	}
	c.AddCommand(jsonVia(jsonValue, ac), jsonVia(jsonValue, bal), jsonVia(jsonValue, e.benchListCmd()), jsonVia(jsonValue, rewrite), jsonVia(jsonValue, e.chaosCmd()))
	for _, x := range bench.Experiments {
		c.AddCommand(jsonVia(jsonValue, e.experimentCmd(x.Name, x.Title, []*bench.Experiment{x})))
	}
	c.AddCommand(jsonVia(jsonValue, e.experimentCmd("all", "every experiment, one report", bench.Experiments)))
	c.AddCommand(jsonVia(jsonValue, e.lvmWideCmd()), jsonVia(jsonValue, e.lvmValCmd()))
	return c
}

// lvmValCmd is `roam bench lvm-val`: issue 48's validation (c), the
// simulator against agents; not among bench.Experiments.
func (e *env) lvmValCmd() *cobra.Command {
	spec := bench.DefaultLVMVal
	x := bench.LVMVal(&spec)
	c := e.experimentCmd(x.Name, x.Title, []*bench.Experiment{x})
	f := c.Flags()
	f.StringVar(&spec.Nodes, "nodes", spec.Nodes, "node counts, comma-separated, a fresh cluster each")
	f.StringVar(&spec.Jobs, "jobs", spec.Jobs, "job counts, comma-separated: a number, n (one a node), n/K or Kn")
	f.Float64Var(&spec.CPUTotal, "cpu-total", spec.CPUTotal, "the cluster's CPU, cores, shared equally by its nodes")
	f.Float64Var(&spec.Alone, "alone", spec.Alone, "seconds a job runs alone on a node")
	f.IntVar(&spec.Calibrate, "calibrate", spec.Calibrate, "calibration runs a cluster")
	f.Float64Var(&spec.CalAlone, "cal-alone", spec.CalAlone, "seconds a calibration job runs alone on a node")
	f.StringVar(&spec.Subnets, "subnets", spec.Subnets, "a /24 for each node count in turn, comma-separated")
	return c
}

// lvmWideCmd is `roam bench lvm-wide`: an experiment with flags of its
// own, not among bench.Experiments (it brings up 64 nodes).
func (e *env) lvmWideCmd() *cobra.Command {
	spec := bench.DefaultLVMWide
	x := bench.LVMWide(&spec)
	c := e.experimentCmd(x.Name, x.Title, []*bench.Experiment{x})
	f := c.Flags()
	f.IntVar(&spec.Nodes, "nodes", spec.Nodes, "nodes in the cluster")
	f.StringVar(&spec.Jobs, "jobs", spec.Jobs, "job counts, comma-separated: a number, n (one a node), n/K or Kn")
	f.Float64Var(&spec.Work, "work", spec.Work, "CPU seconds a job")
	f.Float64Var(&spec.CPU, "cpu", spec.CPU, "each node's capacity, cores")
	f.IntVar(&spec.Repeat, "repeat", spec.Repeat, "runs of each job count on one cluster (the second measures the noise)")
	f.StringVar(&spec.Subnet, "subnet", spec.Subnet, "the cluster's /24")
	return c
}

// chaosCmd is `roam bench chaos`: the chaos run of issue 45.
func (e *env) chaosCmd() *cobra.Command {
	spec := bench.ChaosSpec{Name: "chaos", MaxRSSMB: bench.ChaosMaxRSSMB, MaxFDs: bench.ChaosMaxFDs}
	c := &cobra.Command{
		Use:   "chaos [--seed N] [--migrations N] [--cycles N] [--faults N]",
		Short: "jobs under random migrations, checkpoint/restarts and faults on real agents: nothing lost, nothing run twice",
		Long: `Brings up 4 nodes, each with a small state directory of its own (--state-mb),
runs --jobs jobs of a user that check their own state and append numbered
lines to shared files, and, by a schedule drawn from --seed (printed; the
same seed draws the same schedule), migrates them, checkpoints and restarts
them, kills agents with SIGKILL and starts them again, cuts and heals links,
fills a node's state directory and kills CRIU mid-dump, until it has made
--migrations migrations, --cycles checkpoint/restart cycles and --faults
faults. After every step: no job lost, none run twice, every record names
where its job runs, every agent within its memory and descriptor bounds.
A broken invariant stops the run with the seed, the step and what was seen
(exit status 1). It prints the counts.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("seed") {
				spec.Seed = time.Now().UnixNano() % 1_000_000_000
			}
			for _, f := range []struct {
				name string
				v    int
			}{{"--migrations", spec.Migrations}, {"--cycles", spec.Cycles}, {"--faults", spec.Faults}, {"--jobs", spec.Jobs}, {"--lines", spec.Lines}} {
				if f.v < 0 || f.v > 1_000_000 || (f.v == 0 && (f.name == "--jobs" || f.name == "--lines")) {
					return fmt.Errorf("%s: %d is out of range", f.name, f.v)
				}
			}
			if spec.StateMB < 16 {
				return fmt.Errorf("--state-mb: %d is out of range (16 or more)", spec.StateMB)
			}
			spec.Roamd = roamdPath()
			res, err := bench.Chaos(spec, os.Stderr)
			if e.json {
				if jerr := e.printJSON(res); err == nil {
					err = jerr
				}
				return err
			}
			fmt.Fprint(e.out, res.String())
			return err
		},
	}
	c.Flags().Int64Var(&spec.Seed, "seed", 0, "the schedule's seed (default: drawn from the clock, and printed)")
	c.Flags().IntVar(&spec.Migrations, "migrations", bench.ChaosMigrations, "successful migrations to make")
	c.Flags().IntVar(&spec.Cycles, "cycles", bench.ChaosCycles, "checkpoint/restart cycles to make")
	c.Flags().IntVar(&spec.Faults, "faults", bench.ChaosFaults, "faults to inject, a quarter of each kind")
	c.Flags().IntVar(&spec.Jobs, "jobs", bench.ChaosJobs, "jobs running at once")
	c.Flags().IntVar(&spec.Lines, "lines", bench.ChaosLines, "lines each job writes (10 a second) before it exits")
	c.Flags().IntVar(&spec.StateMB, "state-mb", bench.ChaosStateMB, "each node's state directory: a tmpfs of this many MiB")
	c.Flags().StringVar(&spec.Subnet, "subnet", "198.18.104.0/24", "the cluster's /24")
	c.Flags().BoolVar(&spec.ShortCuts, "short-cuts", false, "keep every link cut under the fence's lease (no fencing, no restart after node loss)")
	return c
}

// benchListCmd is `roam bench list`: the framework's experiments.
func (e *env) benchListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "name and describe the experiments of roam bench EXPERIMENT",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if e.json {
				type exp struct {
					Name  string `json:"name"`
					Title string `json:"title"`
					Seed  string `json:"seed"`
					About string `json:"about"`
				}
				var out []exp
				for _, x := range bench.Experiments {
					out = append(out, exp{x.Name, x.Title, x.Seed, x.About})
				}
				return e.printJSON(out)
			}
			for _, x := range bench.Experiments {
				fmt.Fprintf(e.out, "%s — %s\n  reproduces %s\n%s\n\n", x.Name, x.Title, x.Seed, wrap(x.About, 76, "  "))
			}
			fmt.Fprintf(e.out, "all — every experiment above, one report\n\n")
			fmt.Fprintf(e.out, "usage: roam bench EXPERIMENT [--quick] [--reps N] [--out DIR]\n")
			fmt.Fprintf(e.out, "also: roam bench agent-cost | balance | chaos | lvm-wide | lvm-val (the issues' own benchmarks)\n")
			return nil
		},
	}
}

// experimentCmd runs experiments and writes their report.
func (e *env) experimentCmd(name, short string, exps []*bench.Experiment) *cobra.Command {
	var opts bench.Options
	c := &cobra.Command{
		Use:   name + " [--quick] [--reps N] [--out DIR]",
		Short: short,
		Long: short + `

Brings up the emulated clusters the experiment needs, runs it, tears them
down, and writes results.json, results.csv, the charts (PNG) and report.md
into --out (default bench-results/` + name + `-TIMESTAMP/). Every point is
repeated --reps times (default 6, seed 000 §5.2); --quick makes one
repetition of small work, for CI. roam bench list describes the experiments.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("reps") && opts.Reps < 1 {
				return fmt.Errorf("--reps: %d is out of range (1 to 100)", opts.Reps)
			}
			if opts.Out == "" {
				opts.Out = filepath.Join("bench-results", name+"-"+time.Now().Format("20060102-150405"))
			}
			opts.Bin = filepath.Dir(roamdPath())
			opts.Command = "roam bench " + name + flagsLine(cmd)
			rs, err := bench.RunExperiments(exps, opts, os.Stderr)
			if e.json {
				if jerr := e.printJSON(rs); err == nil {
					err = jerr
				}
				return err
			}
			for _, r := range rs {
				fmt.Fprintf(e.out, "%s — %s\n\n%s\n", r.Experiment, r.Title, bench.Table(r))
				for _, c := range r.Checks {
					if !c.OK {
						fmt.Fprintf(e.out, "check FAILED: %s — %s\n", c.Name, c.Detail)
					}
				}
				for _, n := range r.Notes {
					fmt.Fprintf(e.out, "note: %s\n", n)
				}
			}
			if len(rs) > 0 {
				fmt.Fprintf(e.out, "report: %s\n", filepath.Join(opts.Out, "report.md"))
			}
			return err
		},
	}
	c.Flags().BoolVar(&opts.Quick, "quick", false, "one repetition of small work (for CI)")
	c.Flags().IntVar(&opts.Reps, "reps", 0, "repetitions of every point (default 6; 1 with --quick)")
	c.Flags().StringVar(&opts.Out, "out", "", "directory of the results (default bench-results/EXPERIMENT-TIMESTAMP)")
	return c
}

// flagsLine is the flags given, as typed, for the report.
func flagsLine(cmd *cobra.Command) string {
	var b strings.Builder
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if f.Value.Type() == "bool" {
			fmt.Fprintf(&b, " --%s", f.Name)
		} else {
			fmt.Fprintf(&b, " --%s %s", f.Name, f.Value.String())
		}
	})
	return b.String()
}

// wrap breaks text into lines of at most width, each with indent.
func wrap(text string, width int, indent string) string {
	var lines []string
	line := indent
	for _, w := range strings.Fields(text) {
		if len(line) > len(indent) && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = indent
		}
		if len(line) > len(indent) {
			line += " "
		}
		line += w
	}
	return strings.Join(append(lines, line), "\n")
}
