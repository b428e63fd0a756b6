//go:build !node

package cli

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"roam/internal/emu"
)

func (e *env) clusterCmd() *cobra.Command {
	c := &cobra.Command{Use: "cluster", Short: "bring an emulated cluster up or down on this machine"}
	var spec emu.Spec
	var cpu, mem, agentConfig string
	up := &cobra.Command{
		Use:   "up",
		Short: "start an emulated cluster: one network namespace, cgroup and roamd per node",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			if spec.CPU, err = parseList(cpu, "--cpu", func(s string) (float64, error) { return strconv.ParseFloat(s, 64) }); err != nil {
				return err
			}
			if spec.MemMB, err = parseList(mem, "--mem-mb", strconv.Atoi); err != nil {
				return err
			}
			if agentConfig != "" {
				if spec.AgentYAML, err = os.ReadFile(agentConfig); err != nil {
					return fmt.Errorf("--agent-config: %w", err)
				}
			}
			spec.Name = e.cluster
			spec.Roamd = roamdPath()
			st, err := emu.Up(spec)
			if err != nil {
				return err
			}
			if e.json {
				if st, err = emu.Status(e.cluster); err != nil {
					return err
				}
				return e.printJSON(clusterJSON(st))
			}
			fmt.Fprintf(e.out, "cluster %s up: %d nodes on %s (%s)\n", st.Name, len(st.Nodes), st.Subnet, st.Cgroup)
			if st.Slurm {
				fmt.Fprintf(e.out, "slurm: export SLURM_CONF=%s\n", emu.SlurmConf(st.Name))
			}
			return nil
		},
	}
	up.Flags().IntVar(&spec.Nodes, "nodes", 4, "number of nodes")
	up.Flags().StringVar(&cpu, "cpu", "", "CPU capacity per node in cores, e.g. 0.8,0.4,0.4,0.2 (sum at most the machine's cores)")
	up.Flags().StringVar(&mem, "mem-mb", "", "memory limit per node in MiB, e.g. 512 or 512,256")
	up.Flags().StringVar(&spec.Link, "link", "", "shape each node's link: RATE[:DELAY], e.g. 100mbit:2ms")
	up.Flags().StringVar(&spec.Subnet, "subnet", emu.DefaultSubnet, "the cluster's /24 inside 198.18.0.0/15")
	up.Flags().StringVar(&spec.Policy, "policy", "fifo", "load-vector update policy: fifo or beneficial")
	up.Flags().DurationVar(&spec.Interval, "interval", 0, "load dissemination interval (default 1s)")
	up.Flags().StringVar(&spec.Fence, "fence", "", "every agent's fence.lease, fence.kill and fence.margin, e.g. 3s,6s,2s (default: the agent's, 20s,40s,10s)")
	up.Flags().Int64Var(&spec.JobPids, "job-pids", 0, "the processes and threads one job may have on each node (its jobs.pids; default 4096)")
	up.Flags().IntVar(&spec.StateMB, "state-mb", 0, "give each node's state directory a tmpfs of its own of this many MiB (default: the nodes share the cluster's)")
	up.Flags().StringVar(&agentConfig, "agent-config", "", "a YAML file of roamd config keys every node gets besides the cluster's own (limits, say)")
	up.Flags().BoolVar(&spec.Slurm, "slurm", false, "also start Slurm: slurmctld, slurmdbd and its database on node 1, a slurmd on every node (docs/slurm.md)")
	up.Flags().StringVar(&spec.Scheduler, "scheduler", "", "scheduling policy at start: static, balance, ushering, threshold, mosix (default), feedback or a policy file")

	down := &cobra.Command{
		Use:   "down",
		Short: "stop the emulated cluster and remove everything it made",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := emu.Down(e.cluster); err != nil {
				return err
			}
			return e.result(map[string]string{"cluster": e.cluster, "status": "down"}, func() error {
				_, err := fmt.Fprintf(e.out, "cluster %s down\n", e.cluster)
				return err
			})
		},
	}

	status := &cobra.Command{
		Use:   "status",
		Short: "list the emulated cluster's nodes and whether their agents run",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := emu.Status(e.cluster)
			if err != nil {
				return err
			}
			if e.json {
				return e.printJSON(clusterJSON(st))
			}
			fmt.Fprintf(e.out, "cluster %s (%s) on %s, %s\n", st.Name, st.Status, st.Subnet, st.Cgroup)
			tw := tabwriter.NewWriter(e.out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "ID\tADDR\tCAPACITY\tMEM-MB\tPID\tSTATE")
			for _, n := range st.Nodes {
				m := "-"
				if n.MemMB > 0 {
					m = strconv.Itoa(n.MemMB)
				}
				fmt.Fprintf(tw, "%s\t%s\t%.2f\t%s\t%d\t%s\n", n.ID, n.Addr, n.Capacity, m, n.PID, n.State)
			}
			return tw.Flush()
		},
	}

	var as emu.AddSpec
	add := &cobra.Command{
		Use:   "add",
		Short: "add a node to the running emulated cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			as.Roamd = roamdPath()
			n, err := emu.Add(e.cluster, as)
			if err != nil {
				return err
			}
			n.State = "up"
			return e.result(nodeJSON(n), func() error {
				_, err := fmt.Fprintf(e.out, "node %s up at %s (pid %d)\n", n.ID, n.Addr, n.PID)
				return err
			})
		},
	}
	add.Flags().Float64Var(&as.CPU, "cpu", 0, "CPU capacity in cores (default: node 1's)")
	add.Flags().IntVar(&as.MemMB, "mem-mb", 0, "memory limit in MiB")
	add.Flags().StringVar(&as.SecretFile, "secret-file", "", "join with this secret instead of the cluster's (to test that outsiders are refused)")

	execCmd := &cobra.Command{
		Use:   "exec NODE -- COMMAND [ARGS...]",
		Short: "run a command inside a node's namespace and cgroup (background load, experiments)",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := emu.Exec(e.cluster, args[0], args[1:], os.Stdin, os.Stdout, os.Stderr)
			if err != nil {
				return err
			}
			if err := c.Wait(); err != nil {
				if ee, ok := err.(*exec.ExitError); ok {
					return exitCode(ee.ExitCode())
				}
				return err
			}
			return nil
		},
	}
	start := &cobra.Command{
		Use:   "start NODE",
		Short: "restart a node's agent that is not running",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := emu.Start(e.cluster, args[0], roamdPath())
			if err != nil {
				return err
			}
			n.State = "up"
			return e.result(nodeJSON(n), func() error {
				_, err := fmt.Fprintf(e.out, "node %s agent started (pid %d)\n", n.ID, n.PID)
				return err
			})
		},
	}
	link := &cobra.Command{
		Use:   "link NODE up|down",
		Short: "cut a node off the cluster's network (down) or connect it again (up); its agent and jobs run on",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if args[1] != "up" && args[1] != "down" {
				return fmt.Errorf("link: %q is not up or down", args[1])
			}
			if err := emu.SetLink(e.cluster, args[0], args[1] == "up"); err != nil {
				return err
			}
			return e.result(map[string]string{"node": args[0], "link": args[1]}, func() error { return nil })
		},
	}
	for _, sub := range []*cobra.Command{up, down, status, add, start, link} {
		jsonVia(jsonValue, sub)
	}
	execCmd.ValidArgsFunction, start.ValidArgsFunction = e.completeEmuNodes, e.completeEmuNodes
	link.ValidArgsFunction = func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) == 1 {
			return prefixed([]string{"up", "down"}, toComplete), never
		}
		return e.completeEmuNodes(cmd, args, toComplete)
	}
	c.AddCommand(up, down, status, add, execCmd, start, link)
	return c
}

// clusterNode is a node of roam cluster status --json.
type clusterNode struct {
	ID       string  `json:"id"`
	Addr     string  `json:"addr"`
	Capacity float64 `json:"capacity"`
	MemMB    int     `json:"mem_mb,omitempty"`
	PID      int     `json:"pid"`
	State    string  `json:"state"` // up: its agent runs; down
}

func nodeJSON(n emu.NodeState) clusterNode {
	return clusterNode{n.ID, n.Addr, n.Capacity, n.MemMB, n.PID, n.State}
}

// clusterJSON is roam cluster status --json (and up's).
func clusterJSON(st emu.State) any {
	out := struct {
		Name   string        `json:"name"`
		Subnet string        `json:"subnet"`
		Status string        `json:"status"`
		Nodes  []clusterNode `json:"nodes"`
	}{st.Name, st.Subnet, st.Status, []clusterNode{}}
	for _, n := range st.Nodes {
		out.Nodes = append(out.Nodes, nodeJSON(n))
	}
	return out
}

// parseList parses a comma-separated list of numbers; empty gives nil.
func parseList[T any](s, flag string, parse func(string) (T, error)) ([]T, error) {
	if s == "" {
		return nil, nil
	}
	var out []T
	for _, f := range strings.Split(s, ",") {
		v, err := parse(strings.TrimSpace(f))
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a number", flag, f)
		}
		out = append(out, v)
	}
	return out, nil
}
