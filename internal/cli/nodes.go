package cli

import (
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"roam/internal/api"
	"roam/internal/secret"
)

func (e *env) nodesCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "nodes",
		Short: "what the agent knows of every node: alive, dead or draining, capacity, load, free memory, version, how users' jobs run there, its kernel, CRIU and CPU",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := e.client()
			if err != nil {
				return err
			}
			var nodes []api.NodeInfo
			if err := cl.Get(api.PathNodes, &nodes); err != nil {
				return err
			}
			if e.json {
				return e.printJSON(nodes)
			}
			tw := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tADDR\tSTATE\tCAPACITY\tLOAD\tMEM-FREE-MB\tJOB-MEM-MB\tAGE\tVERSION\tUSER-JOBS\tKERNEL\tCRIU\tCPU")
			for _, n := range nodes {
				id := n.ID
				if n.Self {
					id += "*"
				}
				ld, mem, age := "-", "-", "-"
				if n.Load != nil {
					ld = fmt.Sprintf("%.2f", *n.Load)
					mem = fmt.Sprintf("%.0f", *n.MemFreeMB)
					age = fmt.Sprintf("%.1fs", float64(*n.InfoAgeMS)/1000)
				}
				state := "alive"
				switch {
				case !n.Alive:
					state = "dead"
				case n.Draining:
					state = "draining"
				}
				version := n.Version
				if version == "" {
					version = "-"
				}
				// How users' jobs run there: in user namespaces of their own,
				// or in the host's (docs/userns.md).
				users := "host-ns"
				if n.UserNS {
					users = "own-ns"
				}
				// The memory its jobs' requests hold of what it gives them.
				jobMem := "-"
				if n.MemJobsMB > 0 {
					jobMem = fmt.Sprintf("%.0f/%.0f", n.MemHeldMB, n.MemJobsMB)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%.2f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", id, n.Addr, state, n.Capacity, ld, mem, jobMem, age, version, users,
					dash(n.Kernel), dash(n.CRIU), cpuColumn(n))
			}
			return tw.Flush()
		},
	}
	return jsonVia(jsonValue, c)
}

// cpuColumn is what roam nodes shows of a node's CPU: its x86-64 level
// and feature count (what decides where a job's image can run), then its
// model; the features themselves are in --json (cpu_features).
func cpuColumn(n api.NodeInfo) string {
	switch {
	case n.CPU == "" && n.CPUModel == "":
		return "-"
	case n.CPUModel == "":
		return n.CPU
	case n.CPU == "":
		return n.CPUModel
	}
	return n.CPU + "; " + n.CPUModel
}

func (e *env) statsCmd() *cobra.Command {
	return jsonVia(jsonValue, &cobra.Command{
		Use:   "stats",
		Short: "the agent's counters (messages sent, received, rejected) as JSON",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cl, err := e.client()
			if err != nil {
				return err
			}
			var s api.Stats
			if err := cl.Get(api.PathStats, &s); err != nil {
				return err
			}
			return e.printJSON(s) // JSON with or without --json
		},
	})
}

func (e *env) keygenCmd() *cobra.Command {
	var out string
	c := &cobra.Command{
		Use:   "keygen",
		Short: "make a new cluster secret (copy the file to every node's secret_file)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s := secret.New()
			if out == "" || out == "-" {
				return e.result(map[string]string{"secret": s.String()}, func() error {
					_, err := fmt.Fprintln(e.out, s.String())
					return err
				})
			}
			if _, err := os.Stat(out); err == nil {
				return fmt.Errorf("--out: %s exists; not overwriting a cluster secret", out)
			}
			if err := s.WriteFile(out); err != nil {
				return err
			}
			return e.result(map[string]string{"file": out}, func() error { return nil })
		},
	}
	c.Flags().StringVar(&out, "out", "", "write the secret to this file (mode 0600) instead of stdout")
	return jsonVia(jsonValue, c)
}
