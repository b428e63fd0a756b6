//go:build !node

package cli

// roam sim lvm: the load-vector experiment in simulation (sim.RunLVM),
// its report, CSV and JSON written to a directory, the same bytes for the
// same flags.

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"roam/internal/sim"
)

func (e *env) simLVMCmd() *cobra.Command {
	spec := sim.LVMSpec{Base: sim.DefaultConfig(), Work: 200, Warmup: 10 * time.Second, Seeds: 10}
	spec.Base.Policy = "balance"
	var nodes, jobs, out string
	c := jsonVia(jsonValue, &cobra.Command{
		Use:   "lvm",
		Short: "seed 000's load-vector policies, fifo against beneficial, on fan-outs where the vectors overflow",
		Long: `roam sim lvm starts --jobs jobs at once on one node of clusters of --nodes
nodes, after --warmup of gossip, under the load-vector policies fifo and
beneficial, --seeds seeds each, seed k of one paired with seed k of the
other. It reports the load-balancing time (until every node runs within
one job of its share), the time until no node runs more than its share + 1,
and the makespan, each policy's mean and beneficial / fifo with 95 %
intervals, into --out: report.md, results.csv (a row a run), results.json.
Jobs: a number, n (one a node), n/K or Kn.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if spec.Nodes, err = intList(nodes); err != nil {
				return fmt.Errorf("--nodes: %w", err)
			}
			spec.Jobs = nil
			for _, s := range strings.Split(jobs, ",") {
				j, err := sim.ParseJobCount(strings.TrimSpace(s))
				if err != nil {
					return fmt.Errorf("--jobs: %w", err)
				}
				spec.Jobs = append(spec.Jobs, j)
			}
			pts, err := sim.RunLVM(spec, func(p sim.LVMPoint) {
				if !e.json {
					fmt.Fprintf(e.out, "%d nodes, %s jobs: %d seeds each policy done\n", p.Nodes, p.Jobs, len(p.Fifo))
				}
			})
			if err != nil {
				return err
			}
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
			for name, b := range map[string][]byte{"report.md": sim.LVMReport(spec, pts), "results.csv": sim.LVMCSV(pts), "results.json": sim.LVMJSON(pts)} {
				if err := os.WriteFile(filepath.Join(out, name), b, 0o644); err != nil {
					return err
				}
			}
			if e.json {
				return e.printJSON(pts)
			}
			fmt.Fprintf(e.out, "report: %s\n", filepath.Join(out, "report.md"))
			return nil
		},
	})
	f := c.Flags()
	f.StringVar(&nodes, "nodes", "16,64,256,1024", "node counts, comma-separated")
	f.StringVar(&jobs, "jobs", "8,n/2,n", "job counts, comma-separated: a number, n, n/K or Kn")
	f.IntVar(&spec.Seeds, "seeds", spec.Seeds, "seeds a point, each run under both policies")
	f.Float64Var(&spec.Work, "work", spec.Work, "CPU seconds a job")
	f.DurationVar(&spec.Warmup, "warmup", spec.Warmup, "gossip before the jobs start")
	f.Float64Var(&spec.Base.Capacity, "capacity", spec.Base.Capacity, "each node's CPU, cores")
	f.IntVar(&spec.Base.VectorSize, "vector-size", spec.Base.VectorSize, "load vector entries")
	f.StringVar(&spec.Base.Policy, "policy", spec.Base.Policy, "scheduling policy (roam policy's names)")
	f.StringVar(&out, "out", "sim-lvm", "directory for the results")
	return c
}

// intList reads comma-separated positive integers.
func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, v)
	}
	return out, nil
}
