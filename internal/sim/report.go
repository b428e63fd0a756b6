package sim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// fields are Results' columns, in order, for CSV and the report.
func (r Results) fields() [][2]string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', 10, 64) }
	return [][2]string{
		{"nodes", strconv.Itoa(r.Nodes)}, {"simulated_seconds", f(r.Seconds)}, {"seed", strconv.FormatInt(r.Seed, 10)},
		{"policy", r.Policy}, {"placement", r.Placement}, {"vector_policy", r.Vector},
		{"processes_submitted", strconv.Itoa(r.Submitted)}, {"processes_done", strconv.Itoa(r.Done)}, {"processes_lost", strconv.Itoa(r.Lost)},
		{"nodes_failed", strconv.Itoa(r.Failed)}, {"makespan_s", f(r.Makespan)}, {"mean_response_s", f(r.MeanResp)},
		{"mean_slowdown", f(r.MeanSlow)}, {"p99_slowdown", f(r.P99Slow)}, {"migrations", strconv.Itoa(r.Migrations)},
		{"moves_refused", strconv.Itoa(r.Refused)}, {"rounds", strconv.FormatUint(r.Rounds, 10)},
		{"mean_gossip_age_s", f(r.GossipAge)}, {"messages_per_node_per_s", f(r.MsgsPerNode)},
	}
}

// CSV is the results as a header line and one row.
func (r Results) CSV() []byte {
	var h, v bytes.Buffer
	for i, kv := range r.fields() {
		if i > 0 {
			h.WriteByte(',')
			v.WriteByte(',')
		}
		h.WriteString(kv[0])
		v.WriteString(kv[1])
	}
	return append(append(h.Bytes(), '\n'), append(v.Bytes(), '\n')...)
}

// JSON is the results as one indented object.
func (r Results) JSON() []byte {
	b, _ := json.MarshalIndent(r, "", "  ")
	return append(b, '\n')
}

// Report is the results in Markdown, with what the model leaves out.
func (r Results) Report() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# roam sim: %d nodes, %g simulated seconds, seed %d\n\n", r.Nodes, r.Seconds, r.Seed)
	fmt.Fprintf(&b, "Policy %s, placement %s, load vector %s.\n\n| measure | value |\n|---|---|\n", orNone(r.Policy), r.Placement, orNone(r.Vector))
	for _, kv := range r.fields()[6:] {
		fmt.Fprintf(&b, "| %s | %s |\n", kv[0], kv[1])
	}
	b.WriteString("\nSlowdown is a process's time in the system over its length alone on a node; p99 is " +
		"known to 1 % (a histogram). Gossip age is the mean age of the load vectors' entries, sampled as messages arrive. " +
		"Messages are load messages, starts on another node, and each move's request and answer. " +
		"The simulator's own cost is in cost.json, which differs from run to run; these files do not.\n")
	if r.Nodes > unknownLimit {
		fmt.Fprintf(&b, "\nPast %d nodes, placement weighs only the nodes in the home's load vector and itself: "+
			"the agent also counts every other member at the known nodes' mean load.\n", unknownLimit)
	}
	return b.Bytes()
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// JSON is the cost as one indented object.
func (c Cost) JSON() []byte {
	b, _ := json.MarshalIndent(c, "", "  ")
	return append(b, '\n')
}
