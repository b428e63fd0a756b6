package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"roam/internal/bench"
	"roam/internal/ckpt"
)

func (e *env) benchCmd() *cobra.Command {
	c := &cobra.Command{Use: "bench", Short: "run a benchmark on an emulated cluster it brings up and tears down"}
	spec := bench.AgentCostSpec{}
	var asJSON bool
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
			if asJSON {
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
	ac.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	js := bench.JobStartSpec{}
	jobStart := &cobra.Command{
		Use:   "job-start",
		Short: "roam run -d of N true jobs vs a local shell loop starting N processes, same run",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			js.Roamd = roamdPath()
			r, err := bench.JobStart(js, os.Stderr)
			if err != nil {
				return err
			}
			if asJSON {
				return e.printJSON(r)
			}
			fmt.Fprintf(e.out, "roam run -d -n %d true on %d nodes: %.2f s, %.0f jobs/s (all finished with 0: %v)\n",
				r.Jobs, r.Nodes, r.RoamSeconds, r.RoamPerSec, r.AllFinishedOK)
			fmt.Fprintf(e.out, "local shell loop, %d /bin/true:   %.2f s, %.0f processes/s\n", r.Jobs, r.LocalSeconds, r.LocalPerSec)
			fmt.Fprintf(e.out, "ratio roam/local: %.2f; target >= 200 jobs/s: %v\n", r.Ratio, r.RoamPerSec >= 200 && r.AllFinishedOK)
			return nil
		},
	}
	jobStart.Flags().IntVar(&js.Nodes, "nodes", 4, "number of nodes")
	jobStart.Flags().IntVar(&js.Jobs, "jobs", 1000, "number of jobs")
	jobStart.Flags().StringVar(&js.Subnet, "subnet", "198.18.101.0/24", "the benchmark cluster's /24")
	jobStart.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	ms := bench.MigrateSpec{}
	var sizes string
	mig := &cobra.Command{
		Use:   "migrate",
		Short: "eager and lazy migration of 16 MiB, 128 MiB and 1 GiB processes vs a raw copy plus a local dump and restore, same run",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			for _, f := range strings.Split(sizes, ",") {
				n, err := strconv.Atoi(strings.TrimSpace(f))
				if err != nil || n < 1 || n > 16384 {
					return fmt.Errorf("--sizes: %q is not a size in MiB (1 to 16384)", f)
				}
				ms.SizesMB = append(ms.SizesMB, n)
			}
			ms.Roamd = roamdPath()
			ms.Migjob = filepath.Join(filepath.Dir(ms.Roamd), "migjob")
			if _, err := os.Stat(ms.Migjob); err != nil {
				return fmt.Errorf("workload %s is missing (make build makes it)", ms.Migjob)
			}
			ms.CRIU = ckpt.DefaultPath()
			ps, err := bench.Migrate(ms, os.Stderr)
			if err != nil {
				return err
			}
			if asJSON {
				return e.printJSON(ps)
			}
			tw := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "RSS MiB\tMiB moved\teager freeze ms\teager total ms\traw copy ms\tlocal dump+restore ms\tratio\tlazy freeze ms\tlazy window ms\tlazy total ms\t")
			for _, p := range ps {
				fmt.Fprintf(tw, "%d\t%.1f\t%.0f\t%.0f\t%.0f\t%.0f\t%.2f\t%.0f\t%.0f\t%.0f\t\n", p.SizeMB, float64(p.Bytes)/(1<<20),
					p.EagerFreezeMS, p.EagerTotalMS, p.RawCopyMS, p.LocalDumpMS+p.LocalRestMS, p.Ratio,
					p.LazyFreezeMS, p.LazyWindowMS, p.LazyTotalMS)
			}
			tw.Flush()
			fmt.Fprintln(e.out, "ratio = eager total / (raw copy + local dump + local restore); target <= 1.5")
			return nil
		},
	}
	mig.Flags().StringVar(&sizes, "sizes", "16,128,1024", "process sizes in MiB")
	mig.Flags().StringVar(&ms.Subnet, "subnet", "198.18.102.0/24", "the benchmark cluster's /24")
	mig.Flags().BoolVar(&asJSON, "json", false, "print JSON")

	var bs bench.BalanceSpec
	var cpus, policies string
	var bothBg bool
	bal := &cobra.Command{
		Use:   "balance",
		Short: "makespan of equal CPU jobs started on the slowest node: balance vs static vs the ideal, same run",
		Long: `Brings up a heterogeneous cluster (--cpu), starts --jobs processes of --work
CPU-seconds each on the last (slowest) node, and measures the makespan under
each policy, one fresh cluster per policy, next to the ideal (total work /
total capacity). static places round-robin (its own placement). With
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
			if asJSON {
				return e.printJSON(all)
			}
			fmt.Fprint(e.out, bench.FormatBalance(all))
			return nil
		},
	}
	bal.Flags().StringVar(&cpus, "cpu", "0.8,0.4,0.4,0.2", "CPU capacity per node")
	bal.Flags().IntVar(&bs.Jobs, "jobs", 12, "number of jobs")
	bal.Flags().Float64Var(&bs.Work, "work", 8, "CPU-seconds per job")
	bal.Flags().StringVar(&policies, "policies", "balance,static", "policies to compare, one run each")
	bal.Flags().BoolVar(&bs.Background, "background", false, "background load on node 2")
	bal.Flags().BoolVar(&bothBg, "both", false, "run without and with the background load")
	bal.Flags().StringVar(&bs.Subnet, "subnet", "198.18.103.0/24", "the benchmark cluster's /24")
	bal.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	c.AddCommand(ac, jobStart, mig, bal)
	return c
}
