package bench

// lvm-val: issue 48's validation (c). The fan-outs of roam sim lvm (N
// jobs started at once on node 1, the balance policy spreading them) on
// real agents at 8 and 16 nodes, and the same fan-outs in the simulator,
// seed k of the simulator against run k of the agents: per-run errors,
// their median with a distribution-free 95 % interval, and migration
// counts on both sides. The simulator runs twice: its own model, and
// with the agents' way of moving jobs (sim.AgentModel), whose costs are
// measured on the cluster before the runs it is compared with (a job
// alone on a node, single moves of a pair of jobs), never fitted to them.
// Not among Experiments: make test's quick run brings up no such cluster.

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"roam/internal/api"
	"roam/internal/emu"
	"roam/internal/load"
	"roam/internal/paired"
	"roam/internal/sim"
)

// LVMValSpec is lvm-val's set-up; roam bench lvm-val's flags fill it.
type LVMValSpec struct {
	Nodes    string  // node counts, comma-separated
	Jobs     string  // job counts as roam sim lvm's (8, n, n/2)
	CPUTotal float64 // the cluster's CPU, cores, shared equally by its nodes
	Alone    float64 // seconds a job runs alone on a node
	// Calibrate is the calibration runs a cluster: each a job alone on
	// node 2 and a pair on node 1, of CalAlone seconds alone.
	Calibrate int
	CalAlone  float64
	Subnets   string // a /24 for each node count in turn, comma-separated
}

// DefaultLVMVal: 0.8 of the machine's 2 cores for the jobs whatever the
// size (8 nodes of 0.1, 16 of 0.05), so that the agents and CRIU keep
// the rest; jobs of 20 s alone, as roam sim lvm's validation runs.
var DefaultLVMVal = LVMValSpec{Nodes: "8,16", Jobs: "n", CPUTotal: 0.8, Alone: 20, Calibrate: 3, CalAlone: 6,
	Subnets: "198.18.117.0/24,198.18.118.0/24"}

// LVMVal is the experiment on spec, read when it runs (after the flags).
func LVMVal(spec *LVMValSpec) *Experiment {
	return &Experiment{
		Name:  "lvm-val",
		Title: "the simulator against real agents: fan-outs from one node at 8 and 16 nodes",
		Seed:  "issue 48, validation (c)",
		About: "On a fresh cluster per node count (the fifo load vector, the balance policy), first calibration runs (a pair on node 1 of which balance moves one: a move's freeze and its time before the freeze; a pinned job on every node: the nodes' speed under their quotas with the fan-out's load on the machine), then --reps runs of each job count started at once on node 1; then the simulator runs each fan-out with seeds 1..reps, with its own model and with the agents' (lanes of the policy's parallel, the calibration's median freeze, prepare and speed). Per run: the simulator's value over the agents' − 1; the median of those errors with its distribution-free 95 % interval (order statistics of the sign test), and the median of their absolute values.",
		run:   func(x *Run) error { return lvmVal(x, *spec) },
	}
}

// valSide is one node count's runs: the agents' by job count, and the
// calibration.
type valSide struct {
	n          int
	cpu, work  float64
	agents     map[string][]wideRun
	freezes    map[string][]float64 // the fan-outs' moves' freezes, ms
	speed      []float64            // a job on every node
	speedAlone []float64            // a job alone on node 2
	freeze     []float64            // calibration moves, ms
	prepare    []float64
	loads      []float64 // the 1-minute load average at each run's start
	jobsSpec   []sim.JobCount
	calibrated sim.AgentModel
}

func lvmVal(x *Run, spec LVMValSpec) error {
	ns, err := positiveInts(spec.Nodes)
	if err != nil {
		return fmt.Errorf("--nodes: %w", err)
	}
	var jcs []sim.JobCount
	for _, s := range strings.Split(spec.Jobs, ",") {
		jc, err := sim.ParseJobCount(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("--jobs: %w", err)
		}
		jcs = append(jcs, jc)
	}
	subnets := strings.Split(spec.Subnets, ",")
	if !(spec.CPUTotal > 0) || !(spec.Alone > 0) || !(spec.CalAlone > 0) || spec.Calibrate < 1 || subnets[0] == "" {
		return fmt.Errorf("lvm-val: cpu %v, alone %v s, calibrate %d × %v s, subnets %q: want positive, positive, ≥ 1 × positive, one at least",
			spec.CPUTotal, spec.Alone, spec.Calibrate, spec.CalAlone, spec.Subnets)
	}
	r := x.Res
	r.XLabel = "nodes"
	r.Setup = fmt.Sprintf("Nodes sharing %g CPU equally, load vectors of %d entries (fifo), scheduler balance; jobs of %g s alone on a node (burn), all started on node 1; %d runs a job count, %d calibration runs a cluster.",
		spec.CPUTotal, load.DefaultVectorSize, spec.Alone, x.Reps, spec.Calibrate)
	x.plan(len(ns) * (len(jcs)*x.Reps + 2*spec.Calibrate))
	for i, n := range ns {
		cpu := spec.CPUTotal / float64(n)
		v := &valSide{n: n, cpu: cpu, work: spec.Alone * cpu, agents: map[string][]wideRun{}, freezes: map[string][]float64{}, jobsSpec: jcs}
		cs := emu.Spec{Name: "val" + strconv.Itoa(n), Nodes: n, CPU: []float64{cpu}, Subnet: strings.TrimSpace(subnets[i%len(subnets)]),
			Policy: string(load.PolicyFIFO), Scheduler: "balance"}
		err := withWideCluster(x, cs, func(st emu.State, cl *api.Client) error {
			if err := valCalibrate(x, cl, st, v, spec); err != nil {
				return err
			}
			return valRuns(x, cl, st, v)
		})
		if v.calibrated.On() {
			valCompare(r, v) // the runs done, before a failure too
		}
		if err != nil {
			return err
		}
		part := *r
		part.Measures, part.Notes, part.Checks = slices.Clone(r.Measures), slices.Clone(r.Notes), slices.Clone(r.Checks)
		if err := WriteResults([]*Result{&part}, x.Options); err != nil {
			return err
		}
	}
	return nil
}

// valRuns runs every job count x.Reps times, interleaved (run k of each
// job count, then run k+1), so that a drift of the machine's speed
// reaches every count alike.
func valRuns(x *Run, cl *api.Client, st emu.State, v *valSide) error {
	for k := 1; k <= x.Reps; k++ {
		for _, jc := range v.jobsSpec {
			j := jc.Of(v.n)
			x.step("%d nodes, %d jobs (%s), run %d", v.n, j, jc, k)
			la := loadAverage()
			w, err := wideFanout(x, cl, st, j, v.work)
			if err != nil {
				return err
			}
			v.agents[jc.String()] = append(v.agents[jc.String()], w)
			v.freezes[jc.String()] = append(v.freezes[jc.String()], w.freezes...)
			v.loads = append(v.loads, la)
		}
	}
	return nil
}

// valCalibrate measures the agents' costs on this cluster, apart from
// the runs they are compared with. A move's: a pair on node 1, of which
// balance moves one (its freeze, and its total less its freeze and any
// post-copy window: the time before the job stops), beside a job alone
// on node 2, pinned (the node's speed alone). The nodes' speed with the
// fan-out's load on the machine: a pinned job on every node at once (its
// work over its time, over the node's capacity).
func valCalibrate(x *Run, cl *api.Client, st emu.State, v *valSide, spec LVMValSpec) error {
	work := spec.CalAlone * v.cpu
	argv := []string{x.tool("burn"), strconv.FormatFloat(work, 'g', -1, 64), "0"}
	limit := time.Duration(4*spec.CalAlone*float64(time.Second)) + 2*time.Minute
	speed := func(j api.Job) float64 { return work / j.Ended.Sub(j.Started).Seconds() / v.cpu }
	for k := 1; k <= spec.Calibrate; k++ {
		x.step("%d nodes, calibration %d: a move, and a job alone", v.n, k)
		js, err := valStart(x, cl, st, limit, api.RunRequest{Argv: argv, Count: 1, On: "2", Pin: true}, api.RunRequest{Argv: argv, Count: 2, On: "1"})
		if err != nil {
			return err
		}
		for _, j := range js {
			if j.Node == "2" && j.Migrations == 0 && j.Ended.After(j.Started) {
				v.speedAlone = append(v.speedAlone, speed(j))
			}
			for _, m := range j.MigrationLog {
				if m.OK {
					v.freeze = append(v.freeze, m.FreezeMS)
					v.prepare = append(v.prepare, max(m.TotalMS-m.FreezeMS-m.WindowMS, 0))
				}
			}
		}
		x.step("%d nodes, calibration %d: a job on every node", v.n, k)
		var every []api.RunRequest
		for i := range st.Nodes {
			every = append(every, api.RunRequest{Argv: argv, Count: 1, On: st.Nodes[i].ID, Pin: true})
		}
		if js, err = valStart(x, cl, st, limit, every...); err != nil {
			return err
		}
		for _, j := range js {
			if j.Migrations == 0 && j.Ended.After(j.Started) {
				v.speed = append(v.speed, speed(j))
			}
		}
	}
	if len(v.speed) == 0 || len(v.freeze) == 0 {
		return fmt.Errorf("calibration on %d nodes: %d speeds and %d moves measured, want one of each at least", v.n, len(v.speed), len(v.freeze))
	}
	ms := func(xs []float64) time.Duration {
		return time.Duration(paired.Median(xs).Median * float64(time.Millisecond))
	}
	v.calibrated = sim.AgentModel{Lanes: true, Prepare: ms(v.prepare), Freeze: ms(v.freeze), Speed: paired.Median(v.speed).Median}
	x.note("%d nodes: calibrated %s", v.n, v.calibrated)
	return nil
}

// valStart waits for a quiet cluster, starts the requests and waits for
// their jobs' ends.
func valStart(x *Run, cl *api.Client, st emu.State, limit time.Duration, reqs ...api.RunRequest) ([]api.Job, error) {
	if err := waitVector(cl, len(st.Nodes), min(load.DefaultVectorSize, len(st.Nodes)-1), time.Minute); err != nil {
		x.note("%v; going on", err)
	}
	var ids []string
	for _, rq := range reqs {
		got, err := start(cl, rq)
		if err != nil {
			return nil, err
		}
		ids = append(ids, got...)
	}
	return waitJobs(cl, ids, limit)
}

// loadAverage is the machine's 1-minute load average, -1 unread.
func loadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	v, err := strconv.ParseFloat(f[0], 64)
	if err != nil {
		return -1
	}
	return v
}

// positiveInts reads comma-separated positive integers.
func positiveInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || v < 2 {
			return nil, fmt.Errorf("%q is not a node count of 2 or more", f)
		}
		out = append(out, v)
	}
	return out, nil
}
