// Package bench runs roam's benchmarks on emulated clusters: it brings up
// the cluster an experiment needs, measures, tears it down, and reports.
// Benchmarks compare side by side within one run; they are not timed tests.
package bench

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"roam/internal/api"
	"roam/internal/emu"
	"roam/internal/procfs"
)

// AgentCostSpec configures the agent-cost benchmark.
type AgentCostSpec struct {
	Nodes    int
	Duration time.Duration
	Interval time.Duration
	Subnet   string
	Roamd    string
}

// AgentCostNode is one node's measured cost.
type AgentCostNode struct {
	ID         string  `json:"id"`
	CPUPercent float64 `json:"cpu_percent"`  // of one core
	TxBytesSec float64 `json:"tx_bytes_sec"` // everything the node sent on its link
	RxBytesSec float64 `json:"rx_bytes_sec"`
}

// AgentCost measures, on an idle cluster, each agent's CPU use and the
// bytes each node sends and receives per second — all of it on the wire:
// memberlist's probes and push/pull as well as load messages, from the host
// side of each node's veth.
func AgentCost(spec AgentCostSpec, progress io.Writer) ([]AgentCostNode, error) {
	name := "bagent"
	_ = emu.Down(name)
	defer down(name)
	st, err := up(emu.Spec{Name: name, Nodes: spec.Nodes, Subnet: spec.Subnet, Roamd: spec.Roamd, Interval: spec.Interval})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(progress, "agent-cost: %d nodes up; waiting for membership\n", spec.Nodes)
	if err := waitMembers(api.NewClient(st.Nodes[0].Socket), spec.Nodes); err != nil {
		return nil, fmt.Errorf("agent-cost: %w", err)
	}
	// Let joins and their first push/pulls pass: the idle state is the
	// measured one.
	time.Sleep(3 * time.Second)
	type sample struct{ ticks, rx, tx int64 }
	take := func() []sample {
		out := make([]sample, len(st.Nodes))
		for i, n := range st.Nodes {
			veth := "rv-" + name + "-" + n.ID
			out[i] = sample{procTicks(n.PID), netStat(veth, "rx_bytes"), netStat(veth, "tx_bytes")}
		}
		return out
	}
	fmt.Fprintf(progress, "agent-cost: measuring for %v\n", spec.Duration)
	t0, s0 := time.Now(), take()
	time.Sleep(spec.Duration)
	t1, s1 := time.Now(), take()
	secs := t1.Sub(t0).Seconds()
	var res []AgentCostNode
	for i, n := range st.Nodes {
		res = append(res, AgentCostNode{
			ID:         n.ID,
			CPUPercent: float64(s1[i].ticks-s0[i].ticks) / procfs.UserHZ / secs * 100,
			// The host side receives what the node sends.
			TxBytesSec: float64(s1[i].rx-s0[i].rx) / secs,
			RxBytesSec: float64(s1[i].tx-s0[i].tx) / secs,
		})
	}
	return res, nil
}

func countAlive(ns []api.NodeInfo) int {
	k := 0
	for _, n := range ns {
		if n.Alive {
			k++
		}
	}
	return k
}

// procTicks is utime+stime of a process, in clock ticks.
func procTicks(pid int) int64 {
	st, err := procfs.ReadStat(pid)
	if err != nil {
		return 0
	}
	return int64(st.UTime + st.STime)
}

func netStat(iface, counter string) int64 {
	b, err := os.ReadFile(filepath.Join("/sys/class/net", iface, "statistics", counter))
	if err != nil {
		return 0
	}
	v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return v
}
