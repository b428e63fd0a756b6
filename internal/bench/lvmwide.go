package bench

// lvm-wide: seed 000's load-vector question where roam's 8-entry vectors
// overflow, on real agents. roam bench lvm runs on at most 8 nodes, where
// a vector that refreshes a node's entry in place never fills and the two
// policies hold the same entries; here Nodes nodes (64) send their loads
// to vectors of 8. It is not among Experiments: roam bench all, and make
// test's quick run of it, bring up no 64-node cluster.

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"roam/internal/api"
	"roam/internal/emu"
	"roam/internal/load"
	"roam/internal/paired"
	"roam/internal/sim"
)

// LVMWideSpec is lvm-wide's set-up; roam bench lvm-wide's flags fill it.
type LVMWideSpec struct {
	Nodes  int
	Jobs   string  // job counts, comma-separated, as roam sim lvm's (8, n, n/2)
	Work   float64 // CPU seconds a job (burn)
	CPU    float64 // each node's capacity, cores
	Repeat int     // runs of each job count on one cluster: the second is the noise's measure
	Subnet string
}

// DefaultLVMWide: 64 nodes of 0.02 CPU (1.28 cores, as agent-cost's 64),
// n/2 jobs (where roam sim lvm finds beneficial faster) of 1 CPU-second,
// 50 s alone on a node: a round of two clusters takes about 6 minutes.
var DefaultLVMWide = LVMWideSpec{Nodes: 64, Jobs: "n/2", Work: 1, CPU: 0.02, Repeat: 2, Subnet: "198.18.117.0/24"}

// LVMWide is the experiment on spec, read when it runs (after the flags).
func LVMWide(spec *LVMWideSpec) *Experiment {
	return &Experiment{
		Name:  "lvm-wide",
		Title: "fan-outs from one node under fifo and beneficial, where the load vectors overflow",
		Seed:  "seed 000 §7, Fig. 16 (load-balancing time, standard vs improved load-vector management); issue 48",
		About: "Starts N burn jobs at once on node 1 (`--on 1`) of a cluster of --nodes nodes whose 8-entry load vectors overflow, under the balance policy, on a fresh cluster per load-vector policy, round by round: each round brings up a fifo cluster and then a beneficial one, and runs every job count --repeat times on each. It measures the load-balancing time (until every node runs within one job of its share), the spread time (until none runs more than its share + 1), the makespan, migrations and the entries the vectors discarded; beneficial's first run over fifo's in the same round is the paired ratio, with 95 % intervals over the rounds, and fifo's second run over its first the noise of two runs of one policy.",
		run:   func(x *Run) error { return lvmWide(x, *spec) },
	}
}

// wideRun is one fan-out's measures.
type wideRun struct {
	makespan, balanced, spread float64
	// settled: until no node runs more than its share of the jobs
	// running then, rounded up (BalancedAt, balance's): the jobs that
	// ended leave the count, so that a job ending early does not hide
	// the balancing, as it does the balancing time's.
	settled    float64
	slowdown   float64 // a job's time over its time alone on a node, the mean
	migrations int
	discarded  int64
	freezes    []float64 // the moves' freezes, ms
}

func lvmWide(x *Run, spec LVMWideSpec) error {
	n := pick(x, min(spec.Nodes, 16), spec.Nodes)
	var jobs []int
	for _, s := range strings.Split(spec.Jobs, ",") {
		jc, err := sim.ParseJobCount(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("--jobs: %w", err)
		}
		jobs = append(jobs, jc.Of(n))
	}
	if n < 2 || spec.Repeat < 1 || !(spec.Work > 0) || !(spec.CPU > 0) {
		return fmt.Errorf("lvm-wide: %d nodes, repeat %d, work %v, cpu %v: want ≥ 2, ≥ 1, > 0, > 0", n, spec.Repeat, spec.Work, spec.CPU)
	}
	r := x.Res
	r.XLabel = "jobs"
	r.Setup = fmt.Sprintf("%d nodes of %g CPU, load vectors of %d entries; jobs of %g CPU-seconds (burn), all started on node 1; scheduler balance; each job count run %d times a cluster, a fresh cluster per policy and round.",
		n, spec.CPU, load.DefaultVectorSize, spec.Work, spec.Repeat)
	x.plan(x.Reps * len(load.Policies) * len(jobs) * spec.Repeat)
	// runs[policy][job count][repeat] hold each round's values in turn.
	runs := map[load.Policy]map[int][][]wideRun{}
	for _, pol := range load.Policies {
		runs[pol] = map[int][][]wideRun{}
	}
	for round := 1; round <= x.Reps; round++ {
		for _, pol := range load.Policies {
			err := withWideCluster(x, emu.Spec{Name: "blvmw", Nodes: n, CPU: []float64{spec.CPU}, Subnet: spec.Subnet, Policy: string(pol), Scheduler: "balance"}, func(st emu.State, cl *api.Client) error {
				got := map[int][]wideRun{}
				for rep := 1; rep <= spec.Repeat; rep++ {
					for _, j := range jobs {
						x.step("round %d, %s, %d jobs on %d nodes, run %d", round, pol, j, n, rep)
						w, err := wideFanout(x, cl, st, j, spec.Work)
						if err != nil {
							return err
						}
						got[j] = append(got[j], w)
						if rep == 1 {
							wideAdd(r, string(pol), j, w)
						}
					}
				}
				for j, ws := range got {
					runs[pol][j] = append(runs[pol][j], ws)
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		// Each round's results written as they stand: a run stopped
		// later keeps the rounds done.
		part := *r
		part.Measures, part.Notes = slices.Clone(r.Measures), slices.Clone(r.Notes)
		wideIntervals(&part, runs, jobs)
		if err := WriteResults([]*Result{&part}, x.Options); err != nil {
			return err
		}
	}
	wideIntervals(r, runs, jobs)
	return nil
}

// wideAdd records a run's measures.
func wideAdd(r *Result, series string, j int, w wideRun) {
	x := float64(j)
	r.Add(series, x, "load-balancing time", "s", w.balanced)
	r.Add(series, x, "spread time", "s", w.spread)
	r.Add(series, x, "balanced, ends counted", "s", w.settled)
	r.Add(series, x, "run time", "s", w.makespan)
	r.Add(series, x, "mean slowdown", "", w.slowdown)
	r.Add(series, x, "migrations", "", float64(w.migrations))
	if w.discarded >= 0 {
		r.Add(series, x, "load entries discarded", "", float64(w.discarded))
	}
}

// wideIntervals adds, for each job count, beneficial / fifo (first runs,
// paired by round) and fifo's second run / its first (the noise), each
// the geometric mean with its 95 % interval, as measures and notes.
func wideIntervals(r *Result, runs map[load.Policy]map[int][][]wideRun, jobs []int) {
	pick := func(ws [][]wideRun, k int, f func(wideRun) float64) []float64 {
		var out []float64
		for _, w := range ws {
			if k < len(w) {
				out = append(out, f(w[k]))
			}
		}
		return out
	}
	measures := []struct {
		name string
		f    func(wideRun) float64
	}{
		{"load-balancing time", func(w wideRun) float64 { return w.balanced }},
		{"spread time", func(w wideRun) float64 { return w.spread }},
		{"balanced, ends counted", func(w wideRun) float64 { return w.settled }},
		{"run time", func(w wideRun) float64 { return w.makespan }},
	}
	for _, j := range jobs {
		f, b := runs[load.PolicyFIFO][j], runs[load.PolicyBeneficial][j]
		for _, m := range measures {
			pol := paired.Ratio(pick(f, 0, m.f), pick(b, 0, m.f))
			noise := paired.Ratio(pick(f, 0, m.f), pick(f, 1, m.f))
			for _, v := range ratios(pick(f, 0, m.f), pick(b, 0, m.f)) {
				r.Add("beneficial / fifo, same round", float64(j), m.name+" ratio", "", v)
			}
			for _, v := range ratios(pick(f, 0, m.f), pick(f, 1, m.f)) {
				r.Add("fifo run 2 / run 1, same cluster", float64(j), m.name+" ratio", "", v)
			}
			r.Notes = append(r.Notes, fmt.Sprintf("%d jobs, %s: beneficial / fifo %s over %d rounds; fifo's second run / its first %s (the noise)",
				j, m.name, pol.Format(3), pol.N, noise.Format(3)))
		}
	}
}

// ratios is b[i] / a[i], where both are positive.
func ratios(a, b []float64) []float64 {
	var out []float64
	for i := range min(len(a), len(b)) {
		if a[i] > 0 && b[i] > 0 {
			out = append(out, b[i]/a[i])
		}
	}
	return out
}

// withWideCluster brings up a cluster whose vectors cannot hold every
// node, waits until node 1's is full, runs f and tears it down.
func withWideCluster(x *Run, spec emu.Spec, f func(emu.State, *api.Client) error) error {
	x.note("bringing up %d nodes, load vector %s", spec.Nodes, spec.Policy)
	spec.Roamd = x.tool("roamd")
	_ = down(spec.Name)
	st, err := up(spec)
	if err != nil {
		return err
	}
	defer down(spec.Name)
	cl := api.NewClient(st.Nodes[0].Socket)
	if err := waitVector(cl, spec.Nodes, min(load.DefaultVectorSize, spec.Nodes-1), 2*time.Minute); err != nil {
		return err
	}
	return f(st, cl)
}

// waitVector waits until the node sees every member alive and holds the
// loads of want of them (its vector full), and each is under 0.5
// (runnable threads per unit of capacity, smoothed): the jobs of the run
// before have left, and do not steer this one's first moves.
func waitVector(cl *api.Client, members, want int, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		var ns []api.NodeInfo
		alive, known, busy := 0, 0, ""
		if cl.Get(api.PathNodes, &ns) == nil {
			for _, n := range ns {
				if n.Alive {
					alive++
				}
				if n.Alive && !n.Self && n.Load != nil {
					known++
					if *n.Load >= 0.5 {
						busy = fmt.Sprintf("node %s at %.2f", n.ID, *n.Load)
					}
				}
			}
		}
		if alive == members && known >= want && busy == "" {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %v node 1 sees %d of %d members alive, the loads of %d (want %d) %s", limit, alive, members, known, want, busy)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// wideFanout starts j burn jobs of work CPU-seconds on node 1 and
// measures them once all have ended.
func wideFanout(x *Run, cl *api.Client, st emu.State, j int, work float64) (wideRun, error) {
	w := wideRun{discarded: -1}
	// An idle node 1 under beneficial keeps a busy node's entry until
	// that node itself sends again (no new entry is below its load of
	// 0): a minute and more on 64 nodes. Then the run goes on.
	if err := waitVector(cl, len(st.Nodes), min(load.DefaultVectorSize, len(st.Nodes)-1), time.Minute); err != nil {
		x.note("%v; going on", err)
	}
	disc0 := discardedLoads(st)
	ids, err := start(cl, api.RunRequest{Argv: []string{x.tool("burn"), fmt.Sprint(work), "0"}, Count: j, On: "1"})
	if err != nil {
		return w, err
	}
	alone := work / st.Nodes[0].Capacity
	js, err := waitJobs(cl, ids, time.Duration(float64(j)*alone*float64(time.Second))+2*time.Minute)
	if err != nil {
		return w, err
	}
	if w.makespan, err = makespan(js); err != nil {
		return w, err
	}
	if d := discardedLoads(st); disc0 >= 0 && d >= 0 {
		w.discarded = d - disc0
	}
	caps := map[string]float64{}
	for _, nd := range st.Nodes {
		caps[nd.ID] = nd.Capacity
	}
	w.balanced = BalancedAfter(js, caps)
	w.spread = settledAfter(js, caps, func(count int, share float64) bool { return float64(count) <= share+1 })
	w.settled = math.NaN()
	if at, ok := BalancedAt(js, caps); ok {
		t0, _ := runSpan(js)
		w.settled = at.Sub(t0).Seconds()
	}
	for _, v := range []*float64{&w.balanced, &w.spread, &w.settled} {
		if math.IsNaN(*v) {
			*v = w.makespan // never before the first end: the run time counts
		}
	}
	for _, jb := range js {
		w.migrations += jb.Migrations
		for _, m := range jb.MigrationLog {
			if m.OK {
				w.freezes = append(w.freezes, m.FreezeMS)
			}
		}
		w.slowdown += max(jb.Ended.Sub(jb.Started).Seconds()/alone, 1) / float64(len(js))
	}
	return w, nil
}
