package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"roam/internal/api"
	"roam/internal/emu"
)

// BalanceSpec configures the balancing benchmark: Jobs processes of Work
// CPU-seconds each on a cluster of nodes with capacities CPU, under each
// policy, with or without a background load on node 2.
type BalanceSpec struct {
	Name   string // cluster name
	Subnet string
	Roamd  string
	Burn   string // workloads/burn
	BgLoad string // workloads/bgload
	CPU    []float64
	Jobs   int
	Work   float64 // CPU-seconds per job
	// ShortWork, when set, runs each policy a second time in the same
	// run with jobs of this many CPU-seconds: short jobs show how fast a
	// burst spreads, as their makespan is mostly the time it takes.
	ShortWork float64
	Policies  []string
	// On starts the jobs on this node (balance's test: all on the slowest
	// node); static places them round-robin, its own placement, whatever
	// On says: with --on, static would keep them all there.
	On string
	// Background runs seed 002 §4.3's load on node 2: 4 processes cycling
	// busy and idle for random 0..BgMaxSec seconds.
	Background bool
	BgMaxSec   float64
}

// BalancePoint is one policy's run.
type BalancePoint struct {
	Policy     string  `json:"policy"`
	Background bool    `json:"background"`
	WorkS      float64 `json:"work_s"` // CPU-seconds each job asked for
	MakespanS  float64 `json:"makespan_s"`
	// CPUUsedS is the CPU time the jobs really used, as each measured it
	// (burn's last line): a bit more than the work asked, and what a
	// restored process's first instants and the jobs' start cost them.
	CPUUsedS float64 `json:"cpu_used_s"`
	// IdealS is CPUUsedS over total capacity (the background's work not
	// counted: a lower bound); NominalIdealS the work asked over it.
	IdealS        float64 `json:"ideal_s"`
	NominalIdealS float64 `json:"nominal_ideal_s"`
	// BalancedS is the time from the first start until no node runs more
	// jobs than its share (BalancedAt); -1 if that never held.
	BalancedS  float64 `json:"balanced_s"`
	Ratio      float64 `json:"ratio_to_ideal"`
	Migrations int     `json:"migrations"`
	AllOK      bool    `json:"all_ok"`
	// Timeline is the run told job by job (its moves, where and when it
	// ended, in seconds from the first start) and then the scheduling
	// events of every node: what to read when a makespan is long.
	Timeline []string `json:"timeline,omitempty"`
}

// Balance runs the benchmark, one fresh cluster per policy, one after the
// other on the same machine.
func Balance(spec BalanceSpec, progress io.Writer) ([]BalancePoint, error) {
	var out []BalancePoint
	works := []float64{spec.Work}
	if spec.ShortWork > 0 {
		works = append(works, spec.ShortWork)
	}
	for _, work := range works {
		for _, pol := range spec.Policies {
			sp := spec
			sp.Work = work
			fmt.Fprintf(progress, "balance: %d jobs of %g CPU-s under %s%s\n", sp.Jobs, sp.Work, pol, map[bool]string{true: ", background load on node 2"}[sp.Background])
			p, err := balanceRun(sp, pol)
			if err != nil {
				return out, fmt.Errorf("%s, %g CPU-s: %w", pol, work, err)
			}
			fmt.Fprintf(progress, "balance: %s makespan %.1f s (ideal %.1f s from the CPU used, ratio %.2f), balanced after %.1f s, %d migrations\n",
				pol, p.MakespanS, p.IdealS, p.Ratio, p.BalancedS, p.Migrations)
			out = append(out, p)
		}
	}
	return out, nil
}

func balanceRun(spec BalanceSpec, policy string) (BalancePoint, error) {
	name := spec.Name
	_ = emu.Down(name)
	defer down(name)
	st, err := up(emu.Spec{Name: name, Nodes: len(spec.CPU), CPU: spec.CPU, Subnet: spec.Subnet, Roamd: spec.Roamd, Scheduler: policy})
	if err != nil {
		return BalancePoint{}, err
	}
	cl := api.NewClient(st.Nodes[len(st.Nodes)-1].Socket)
	if err := waitMembers(cl, len(spec.CPU)); err != nil {
		return BalancePoint{}, err
	}
	if err := waitLoads(cl, len(spec.CPU)); err != nil {
		return BalancePoint{}, err
	}
	total := 0.0
	for _, c := range spec.CPU {
		total += c
	}
	p := BalancePoint{Policy: policy, Background: spec.Background, WorkS: spec.Work, NominalIdealS: float64(spec.Jobs) * spec.Work / total}
	p.IdealS = p.NominalIdealS // until the jobs say what they used
	var bg []string
	if spec.Background {
		// Pinned, so it loads node 2 and never moves; it runs until the
		// end of the longest run one could expect.
		dur := 4 * p.IdealS
		bg, err = start(cl, api.RunRequest{Argv: []string{spec.BgLoad, "4", fmt.Sprint(spec.BgMaxSec), fmt.Sprint(dur), "1"}, Count: 1, On: "2", Pin: true})
		if err != nil {
			return p, fmt.Errorf("background load: %w", err)
		}
	}
	on := spec.On
	if policy == "static" {
		on = ""
	}
	began := time.Now()
	ids, err := start(cl, api.RunRequest{Argv: []string{spec.Burn, fmt.Sprint(spec.Work)}, Count: spec.Jobs, On: on})
	if err != nil {
		return p, err
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	deadline := began.Add(time.Duration(6*p.IdealS*float64(time.Second)) + time.Minute)
	for {
		var js []api.Job
		if err := cl.Get(api.PathPS+"?all=1", &js); err == nil {
			done, ok, migs := 0, 0, 0
			var first, last time.Time
			for _, j := range js {
				if !want[j.ID] {
					continue
				}
				migs += j.Migrations
				if first.IsZero() || j.Started.Before(first) {
					first = j.Started
				}
				if j.State == api.StateFinished || j.State == api.StateLost {
					done++
					if j.ExitCode != nil && *j.ExitCode == 0 {
						ok++
					}
					if j.Ended.After(last) {
						last = j.Ended
					}
				}
			}
			if done == len(ids) {
				// The home node's times: from the start to the last exit,
				// whatever this loop's polling period.
				p.MakespanS = last.Sub(first).Seconds()
				p.Timeline = timeline(cl, js, want, first)
				var mine []api.Job
				for _, j := range js {
					if want[j.ID] {
						mine = append(mine, j)
					}
				}
				caps := map[string]float64{}
				for i, c := range spec.CPU {
					caps[strconv.Itoa(i+1)] = c
				}
				if at, ok := BalancedAt(mine, caps); ok {
					p.BalancedS = at.Sub(first).Seconds()
				} else {
					p.BalancedS = -1
				}
				p.Migrations, p.AllOK = migs, ok == len(ids)
				break
			}
		}
		if time.Now().After(deadline) {
			return p, fmt.Errorf("jobs not done after %s", time.Since(began).Round(time.Second))
		}
		// Slow polling: a ps asks every node, and CPU is what is measured.
		time.Sleep(time.Second)
	}
	used, err := cpuUsed(cl, ids)
	if err != nil {
		return p, err
	}
	p.CPUUsedS, p.IdealS = used, used/total
	p.Ratio = p.MakespanS / p.IdealS
	if len(bg) > 0 {
		_ = cl.Do(context.Background(), http.MethodPost, api.PathKill, api.KillRequest{IDs: bg, Signal: 9}, nil)
	}
	return p, nil
}

// cpuUsed adds up the CPU time each job measured itself: burn's last line,
// "burn: done cpu=SECONDS elapsed=SECONDS".
func cpuUsed(cl *api.Client, ids []string) (float64, error) {
	sum := 0.0
	for _, id := range ids {
		var o api.Output
		if err := cl.Get(api.Fill(api.PathJobOutput, id), &o); err != nil {
			return 0, fmt.Errorf("output of job %s: %w", id, err)
		}
		cpu, ok := burnCPU(string(o.Stdout))
		if !ok {
			return 0, fmt.Errorf("job %s: no \"burn: done cpu=\" line in its output", id)
		}
		sum += cpu
	}
	return sum, nil
}

// burnCPU reads the CPU seconds of burn's last line.
func burnCPU(out string) (float64, bool) {
	i := strings.LastIndex(out, "burn: done cpu=")
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(out[i+len("burn: done cpu="):])
	if len(f) == 0 {
		return 0, false
	}
	v, err := strconv.ParseFloat(f[0], 64)
	return v, err == nil && v > 0
}

// BalancedAt is the first moment no node runs more jobs than its share:
// ceil(running jobs × its capacity / the total), the jobs placed by their
// starts, moves and ends (placeChanges), judged once every job has
// started (jobs that start a few milliseconds apart on one node are not
// balanced at the first start). caps are the nodes' capacities by id.
// False if that never held while jobs ran.
func BalancedAt(js []api.Job, caps map[string]float64) (time.Time, bool) {
	total := capacitySum(caps)
	cs := placeChanges(js, true)
	where, started := map[string]string{}, map[string]bool{}
	for i, c := range cs {
		if c.node == "" {
			delete(where, c.job)
		} else {
			where[c.job], started[c.job] = c.node, true
		}
		if i+1 < len(cs) && !cs[i+1].at.After(c.at) || len(where) == 0 || len(started) < len(js) {
			continue // several changes at one instant: judge after the last
		}
		per := map[string]int{}
		for _, n := range where {
			per[n]++
		}
		ok := true
		for n, k := range per {
			if float64(k) > math.Ceil(float64(len(where))*caps[n]/total-1e-9) {
				ok = false
			}
		}
		if ok {
			return c.at, true
		}
	}
	return time.Time{}, false
}

// timeline tells the run: each job's moves and end, then every node's
// scheduling events, times in seconds from the first start.
func timeline(cl *api.Client, js []api.Job, want map[string]bool, t0 time.Time) []string {
	at := func(t time.Time) string { return fmt.Sprintf("%.1f", t.Sub(t0).Seconds()) }
	var out []string
	for _, j := range js {
		if !want[j.ID] {
			continue
		}
		var moves []string
		for _, m := range j.MigrationLog {
			mv := fmt.Sprintf("%s %s->%s", at(m.At), m.From, m.To)
			if !m.OK {
				mv += " (failed)"
			}
			moves = append(moves, mv)
		}
		line := fmt.Sprintf("job %s: ended %s on %s", j.ID, at(j.Ended), j.Node)
		if len(moves) > 0 {
			line += "; moved " + strings.Join(moves, ", ")
		}
		out = append(out, line)
	}
	var evs []api.Event
	_ = cl.Get(api.PathEvents+"?since="+t0.Format(time.RFC3339Nano), &evs)
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%5s node %s %s %s %s->%s: %s", at(e.At), e.Node, e.Kind, e.Job, e.From, e.To, e.Why))
	}
	return out
}

// waitLoads waits until the node sees a load for every member. Each
// node sends its load to two others a second, one of them at random, so
// on 8 nodes the last one to reach this node can take tens of seconds
// (a 15 s wait failed once, in roam bench lvm).
func waitLoads(cl *api.Client, n int) error {
	const wait = time.Minute
	deadline := time.Now().Add(wait)
	for {
		var ns []api.NodeInfo
		var missing []string
		if cl.Get(api.PathNodes, &ns) == nil {
			for _, x := range ns {
				if !x.Alive || !x.Self && x.Load == nil {
					missing = append(missing, x.ID)
				}
			}
			if len(ns)-len(missing) == n {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("loads of all %d nodes not known after %v (alive and with a load: %d of %d listed; not: %s)", n, wait, len(ns)-len(missing), len(ns), strings.Join(missing, ", "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// FormatBalance is the table of a balance benchmark.
func FormatBalance(ps []BalancePoint) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-8s %-10s %6s %10s %8s %14s %9s %10s %6s\n", "policy", "background", "work", "makespan", "ideal", "ratio to ideal", "balanced", "migrations", "all ok")
	for _, p := range ps {
		bal := "never"
		if p.BalancedS >= 0 {
			bal = fmt.Sprintf("%.1fs", p.BalancedS)
		}
		fmt.Fprintf(&b, "%-8s %-10s %5gs %9.1fs %7.1fs %14.2f %9s %10d %6s\n", p.Policy, strconv.FormatBool(p.Background), p.WorkS, p.MakespanS, p.IdealS, p.Ratio, bal, p.Migrations, strconv.FormatBool(p.AllOK))
	}
	b.WriteString("ideal: the CPU time the jobs measured themselves, over the cluster's capacity; balanced: from the first start until no node ran more jobs than its share\n")
	return b.String()
}
