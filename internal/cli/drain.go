package cli

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"roam/internal/api"
)

// nodeCmd is roam node: drain a node, resume it, remove it (root only).
func (e *env) nodeCmd() *cobra.Command {
	c := &cobra.Command{
		Use:   "node",
		Short: "drain a node for maintenance, resume it, or remove it from the cluster (root)",
	}
	var wait bool
	var timeout time.Duration
	drain := &cobra.Command{
		Use:   "drain NODE",
		Short: "move every movable job off NODE and place nothing new there; pinned jobs stay",
		Long: "roam node drain moves every job off NODE that can move (a job started with roam run --pin, or one a\n" +
			"migration found unmovable, stays) and places and moves nothing there until roam node resume. The node\n" +
			"keeps draining across a restart of its agent. With --wait it returns once NODE runs none of the\n" +
			"jobs that can move, and lists the ones that stay, with their reasons.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := e.client()
			if err != nil {
				return err
			}
			if err := setNodeState(cl, args[0], "drain"); err != nil {
				return err
			}
			if !wait {
				return e.nodeResult(args[0], "draining", nil, "draining")
			}
			stay, err := e.waitDrained(cl, args[0], timeout)
			if err != nil {
				return err
			}
			return e.printDrained(args[0], stay)
		},
	}
	drain.Flags().BoolVar(&wait, "wait", false, "return once the node runs no job that can move")
	drain.Flags().DurationVar(&timeout, "timeout", 0, "with --wait, give up after this long (0: never)")
	resume := &cobra.Command{
		Use:   "resume NODE",
		Short: "end a drain: NODE takes jobs again",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := e.client()
			if err != nil {
				return err
			}
			if err := setNodeState(cl, args[0], "resume"); err != nil {
				return err
			}
			return e.nodeResult(args[0], "resumed", nil, "takes jobs again")
		},
	}
	var removeTimeout time.Duration
	remove := &cobra.Command{
		Use:   "remove NODE",
		Short: "drain NODE, wait until it runs no job, and make its agent leave the cluster",
		Long: "roam node remove drains NODE (see roam node drain) and waits until it runs no job; its agent then\n" +
			"leaves the cluster and exits. A node that still runs a pinned job is not removed: end that job\n" +
			"first (roam kill). Started again, the agent joins still draining; roam node resume ends that.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cl, err := e.client()
			if err != nil {
				return err
			}
			node := args[0]
			if err := setNodeState(cl, node, "drain"); err != nil {
				return err
			}
			stay, err := e.waitDrained(cl, node, removeTimeout)
			if err != nil {
				return err
			}
			if len(stay) > 0 {
				_ = e.printDrained(node, stay)
				return fmt.Errorf("node %s still runs %d pinned jobs: it stays, draining (end them with roam kill, then remove it again)", node, len(stay))
			}
			var before []api.NodeInfo
			if err := cl.Get(api.PathNodes, &before); err != nil {
				return err
			}
			if err := setNodeState(cl, node, "leave"); err != nil {
				return err
			}
			for _, n := range before {
				if n.ID == node && n.Self {
					// The agent asked is the one that leaves: it
					// answered, and is gone.
					return e.nodeResult(node, "left", nil, "left the cluster")
				}
			}
			deadline := time.Now().Add(30 * time.Second)
			for time.Now().Before(deadline) {
				var nodes []api.NodeInfo
				if err := cl.Get(api.PathNodes, &nodes); err != nil {
					return err
				}
				gone := true
				for _, n := range nodes {
					if n.ID == node && n.Alive {
						gone = false
					}
				}
				if gone {
					return e.nodeResult(node, "left", nil, "left the cluster")
				}
				time.Sleep(200 * time.Millisecond)
			}
			return fmt.Errorf("node %s was told to leave but is still a member after 30s", node)
		},
	}
	remove.Flags().DurationVar(&removeTimeout, "timeout", 0, "give up waiting for the drain after this long (0: never)")
	for _, sub := range []*cobra.Command{drain, resume, remove} {
		sub.ValidArgsFunction = e.completeNodes(0)
		c.AddCommand(jsonVia(jsonValue, sub))
	}
	return c
}

func setNodeState(cl *api.Client, node, state string) error {
	return cl.Do(context.Background(), http.MethodPost, api.Fill(api.PathNodeDrain, node)+"?state="+state, nil, nil)
}

// waitDrained waits until node runs no job that can move, and returns the
// ones it still runs (pinned, with their reasons).
func (e *env) waitDrained(cl *api.Client, node string, timeout time.Duration) ([]api.Job, error) {
	start := time.Now()
	last := -1
	for {
		var jobs []api.Job
		if err := cl.Get(api.PathPS+"?all=1", &jobs); err != nil {
			return nil, err
		}
		var stay []api.Job
		left := 0
		for _, j := range jobs {
			if j.Node != node || (j.State != api.StateRunning && j.State != api.StateStopped && j.State != api.StateStarting) {
				continue
			}
			if j.Pin || j.PinReason != "" {
				stay = append(stay, j)
			} else {
				left++
			}
		}
		if left == 0 {
			sort.Slice(stay, func(a, b int) bool { return stay[a].ID < stay[b].ID })
			return stay, nil
		}
		if left != last {
			fmt.Fprintf(e.errOut, "node %s: %d jobs to move\n", node, left)
			last = left
		}
		if timeout > 0 && time.Since(start) > timeout {
			return nil, fmt.Errorf("node %s still runs %d jobs that can move after %s", node, left, timeout)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// nodeResult prints what roam node did: with --json {"node", "state",
// "pinned"}, else "node N: text".
func (e *env) nodeResult(node, state string, pinned []api.Job, text string) error {
	return e.result(struct {
		Node   string    `json:"node"`
		State  string    `json:"state"` // draining, drained, resumed, left
		Pinned []api.Job `json:"pinned,omitempty"`
	}{node, state, pinned}, func() error {
		_, err := fmt.Fprintf(e.out, "node %s: %s\n", node, text)
		return err
	})
}

func (e *env) printDrained(node string, stay []api.Job) error {
	if len(stay) == 0 || e.json {
		return e.nodeResult(node, "drained", stay, "drained, runs no job")
	}
	fmt.Fprintf(e.out, "node %s: drained but for %d pinned jobs:\n", node, len(stay))
	for _, j := range stay {
		why := j.PinReason
		if j.Pin {
			why = "started with roam run --pin"
		}
		fmt.Fprintf(e.out, "  %s  %s: %s\n", j.ID, shown(strings.TrimSpace(j.Cmd)), shown(why))
	}
	return nil
}
