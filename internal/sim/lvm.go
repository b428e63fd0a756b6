package sim

// The load-vector experiment (issue 48's science, seed 000 §7 Fig. 13–16):
// fan-outs (fanout.go) under the vector policies fifo and beneficial, on
// clusters large enough that the vectors overflow, paired by seed, with
// 95 % intervals of the paired ratios (package paired).

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"roam/internal/load"
	"roam/internal/paired"
)

// JobCount is a fan-out's number of jobs on n nodes: Fixed if set (the
// DKG's 8), else PerNode × n (n/2: every job can have a node of its
// own; n: every node must get one).
type JobCount struct {
	Fixed   int
	PerNode float64
}

// Of is the count on n nodes, at least 1.
func (j JobCount) Of(n int) int {
	if j.Fixed > 0 {
		return j.Fixed
	}
	return max(1, int(j.PerNode*float64(n)))
}

func (j JobCount) String() string {
	switch {
	case j.Fixed > 0:
		return strconv.Itoa(j.Fixed)
	case j.PerNode == 1:
		return "n"
	case j.PerNode < 1 && 1/j.PerNode == float64(int(1/j.PerNode)):
		return "n/" + strconv.Itoa(int(1/j.PerNode))
	}
	return strconv.FormatFloat(j.PerNode, 'g', -1, 64) + "n"
}

// ParseJobCount reads "8", "n", "n/2" or "2n".
func ParseJobCount(s string) (JobCount, error) {
	bad := fmt.Errorf("job count %q: want a number, n, n/K or Kn", s)
	switch {
	case s == "n":
		return JobCount{PerNode: 1}, nil
	case strings.HasPrefix(s, "n/"):
		k, err := strconv.Atoi(s[2:])
		if err != nil || k < 1 {
			return JobCount{}, bad
		}
		return JobCount{PerNode: 1 / float64(k)}, nil
	case strings.HasSuffix(s, "n"):
		k, err := strconv.ParseFloat(s[:len(s)-1], 64)
		if err != nil || !(k > 0 && k <= 100) {
			return JobCount{}, bad
		}
		return JobCount{PerNode: k}, nil
	}
	k, err := strconv.Atoi(s)
	if err != nil || k < 1 {
		return JobCount{}, bad
	}
	return JobCount{Fixed: k}, nil
}

// LVMSpec is the experiment: for each node count and job count, Seeds
// fan-outs under each vector policy, seed k of one paired with seed k of
// the other. Base is the cluster (capacity, vector size, scheduling
// policy); its Nodes, Seed and VectorPolicy are the experiment's.
type LVMSpec struct {
	Nodes  []int
	Jobs   []JobCount
	Seeds  int
	Base   Config
	Work   float64
	Warmup time.Duration
}

// LVMPoint is one node count and job count: the runs of each policy, in
// seed order.
type LVMPoint struct {
	Nodes      int            `json:"nodes"`
	Jobs       string         `json:"jobs"`
	Fifo       []FanoutResult `json:"fifo"`
	Beneficial []FanoutResult `json:"beneficial"`
}

// RunLVM runs the experiment; progress, if set, hears of each point done.
func RunLVM(spec LVMSpec, progress func(LVMPoint)) ([]LVMPoint, error) {
	if spec.Seeds < 1 || len(spec.Nodes) == 0 || len(spec.Jobs) == 0 {
		return nil, fmt.Errorf("lvm: %d seeds, %d node counts, %d job counts: want at least one of each", spec.Seeds, len(spec.Nodes), len(spec.Jobs))
	}
	var out []LVMPoint
	for _, n := range spec.Nodes {
		for _, jc := range spec.Jobs {
			p := LVMPoint{Nodes: n, Jobs: jc.String()}
			for seed := int64(1); seed <= int64(spec.Seeds); seed++ {
				for _, pol := range load.Policies {
					c := spec.Base
					c.Nodes, c.Seed, c.VectorPolicy = n, seed, pol
					r, err := RunFanout(c, Fanout{Warmup: spec.Warmup, Jobs: jc.Of(n), Work: spec.Work})
					if err != nil {
						return out, fmt.Errorf("%d nodes, %s jobs, seed %d, %s: %w", n, jc, seed, pol, err)
					}
					if pol == load.PolicyFIFO {
						p.Fifo = append(p.Fifo, r)
					} else {
						p.Beneficial = append(p.Beneficial, r)
					}
				}
			}
			out = append(out, p)
			if progress != nil {
				progress(p)
			}
		}
	}
	return out, nil
}

// col is one measure of the runs.
func col(rs []FanoutResult, f func(FanoutResult) float64) []float64 {
	out := make([]float64, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out
}

func never(rs []FanoutResult, spread bool) int {
	k := 0
	for _, r := range rs {
		if r.Never && !spread || r.NeverSpread && spread {
			k++
		}
	}
	return k
}

// LVMReport is the experiment's Markdown report: for each point, each
// policy's mean with its 95 % interval, and beneficial's over fifo's,
// seed by seed, as a geometric mean with its interval (under 1:
// beneficial is faster).
func LVMReport(spec LVMSpec, pts []LVMPoint) []byte {
	var b bytes.Buffer
	c := spec.Base
	fmt.Fprintf(&b, "# roam sim lvm: fifo against beneficial, fan-outs from one node\n\n")
	fmt.Fprintf(&b, "Nodes of %g CPU, load vector of %d entries, scheduling policy %s, gossip every %v. After %v of gossip "+
		"(the vectors full), the jobs, each of %g CPU-seconds, start at once on node 0 with no placement; %d seeds, "+
		"seed k under fifo paired with seed k under beneficial.\n\n", c.Capacity, c.VectorSize, c.Policy, c.Interval, spec.Warmup, spec.Work, spec.Seeds)
	b.WriteString("Balanced: from the start until every node runs within one job of its share (jobs / nodes), looking only before " +
		"the first job ends; a run that never got there counts its makespan (never: how many, fifo/beneficial). Spread: until no " +
		"node runs more than its share + 1 (the same as balanced when the share is under one job). Means with 95 % t intervals; " +
		"ratio: the geometric mean of beneficial / fifo over the seeds with its 95 % interval.\n\n")
	b.WriteString("| nodes | jobs | fifo: balanced s | beneficial: balanced s | never | ratio | fifo: spread s | beneficial: spread s | ratio | fifo: makespan s | beneficial: makespan s | ratio |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range pts {
		f, e := p.Fifo, p.Beneficial
		bal := func(r FanoutResult) float64 { return r.Balanced }
		spr := func(r FanoutResult) float64 { return r.Spread }
		mk := func(r FanoutResult) float64 { return r.Makespan }
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %d/%d | %s | %s | %s | %s | %s | %s | %s |\n", p.Nodes, p.Jobs,
			paired.Mean(col(f, bal)).Format(2), paired.Mean(col(e, bal)).Format(2), never(f, false), never(e, false),
			paired.Ratio(col(f, bal), col(e, bal)).Format(3),
			paired.Mean(col(f, spr)).Format(2), paired.Mean(col(e, spr)).Format(2), paired.Ratio(col(f, spr), col(e, spr)).Format(3),
			paired.Mean(col(f, mk)).Format(1), paired.Mean(col(e, mk)).Format(1), paired.Ratio(col(f, mk), col(e, mk)).Format(3))
	}
	b.WriteString("\nThe vectors: overflows are load messages since the start that came to a full vector from a node not in it " +
		"(fifo then drops its oldest entry); discarded, those beneficial did not keep. Means a run.\n\n")
	b.WriteString("| nodes | jobs | fifo: overflows | beneficial: overflows | beneficial: discarded | fifo: migrations | beneficial: migrations | fifo: mean slowdown | beneficial: mean slowdown |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	for _, p := range pts {
		f, e := p.Fifo, p.Beneficial
		full := func(r FanoutResult) float64 { return float64(r.Full) }
		mig := func(r FanoutResult) float64 { return float64(r.Migrations) }
		slow := func(r FanoutResult) float64 { return r.MeanSlow }
		fmt.Fprintf(&b, "| %d | %s | %.0f | %.0f | %.0f | %.1f | %.1f | %.3f | %.3f |\n", p.Nodes, p.Jobs,
			paired.Mean(col(f, full)).Mean, paired.Mean(col(e, full)).Mean, paired.Mean(col(e, func(r FanoutResult) float64 { return float64(r.Discarded) })).Mean,
			paired.Mean(col(f, mig)).Mean, paired.Mean(col(e, mig)).Mean, paired.Mean(col(f, slow)).Mean, paired.Mean(col(e, slow)).Mean)
	}
	return b.Bytes()
}

// LVMCSV is one row a run.
func LVMCSV(pts []LVMPoint) []byte {
	var b bytes.Buffer
	b.WriteString("nodes,jobs,vector_policy,seed,makespan_s,mean_slowdown,balanced_s,never_balanced,spread_s,never_spread,first_end_s,migrations,overflows,discarded\n")
	g := func(v float64) string { return strconv.FormatFloat(v, 'g', 10, 64) }
	for _, p := range pts {
		for _, r := range append(append([]FanoutResult(nil), p.Fifo...), p.Beneficial...) {
			fmt.Fprintf(&b, "%d,%d,%s,%d,%s,%s,%s,%t,%s,%t,%s,%d,%d,%d\n", r.Nodes, r.Jobs, r.Vector, r.Seed, g(r.Makespan), g(r.MeanSlow),
				g(r.Balanced), r.Never, g(r.Spread), r.NeverSpread, g(r.FirstEnd), r.Migrations, r.Full, r.Discarded)
		}
	}
	return b.Bytes()
}

// LVMJSON is every run, by point.
func LVMJSON(pts []LVMPoint) []byte {
	b, _ := json.MarshalIndent(pts, "", "  ")
	return append(b, '\n')
}
