package bench

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"roam/internal/api"
	"roam/internal/asuser"
	"roam/internal/emu"
)

// The chaos run (issue 45): real agents on an emulated cluster run jobs of
// a user that check their own state and append numbered lines to files
// every node shares, while a schedule drawn from a seed migrates them,
// checkpoints and restarts them, kills agents with SIGKILL and starts them
// again, cuts and heals links, fills a node's state directory and kills
// CRIU in the middle of a dump. After every step the invariants are
// checked (chaoscheck.go); the first violation stops the run with the
// seed, the step and what was seen. The in-process harness proves the
// machines under randomized faults; this proves the real system: CRIU,
// bbolt on a full disk, a SIGKILLed agent's recovery, fencing.

// ChaosSpec configures a chaos run.
type ChaosSpec struct {
	Name   string // the emulated cluster's name (at most 8 characters)
	Subnet string
	Roamd  string
	// Seed draws the schedule; the same seed draws the same choices
	// (what the real system does with them varies with its timing).
	Seed int64
	// The run ends once it has made Migrations successful migrations,
	// Cycles checkpoint/restart cycles and Faults injected faults (a
	// quarter of them, at least, of each kind).
	Migrations, Cycles, Faults int
	Jobs                       int // jobs running at once
	Lines                      int // lines each job writes before it exits 0
	StateMB                    int // each node's state directory: a tmpfs of this many MiB
	// MaxRSSMB and MaxFDs bound every agent's resident memory and open
	// descriptors, at every check.
	MaxRSSMB int
	MaxFDs   int
	// ShortCuts keeps every link cut under the fence's lease: no long
	// cut (14 s: fenced jobs killed, then restarted by their homes),
	// which makes a step take 20 s or more.
	ShortCuts bool
}

// Chaos run defaults: the full run of issue 45's Done-when.
const (
	ChaosMigrations = 1000
	ChaosCycles     = 100
	ChaosFaults     = 100
	ChaosJobs       = 6
	ChaosLines      = 400
	ChaosStateMB    = 64
	// An agent of 4 nodes and a few jobs holds about 60 descriptors and
	// 40 MiB; the bounds leave room for a migration's streams and CRIU's
	// pipes in flight, and catch a leak of one per step long before the
	// end of a run.
	ChaosMaxRSSMB = 256
	ChaosMaxFDs   = 256
	// chaosFence is every agent's fence.lease, kill and margin: short, so
	// that a long link cut fences and restarts in seconds.
	chaosFence = "3s,6s,2s"
	// chaosEvery is the periodic checkpoint interval of half the jobs:
	// the ones a long cut of their node restarts elsewhere.
	chaosEvery = 4 * time.Second
	// chaosReserveMB is every agent's limits.disk_reserve_bytes, in MiB:
	// the default (1 GiB) is more than a small state tmpfs holds.
	chaosReserveMB = 8
)

// The fault kinds, in the order the counts print.
var faultKinds = []string{"agent-kill", "link-cut", "disk-full", "criu-kill"}

// ChaosResult is what a run did.
type ChaosResult struct {
	Seed             int64 `json:"seed"`
	Steps            int   `json:"steps"`
	Migrations       int   `json:"migrations"`
	MigrationsFailed int   `json:"migrations_failed"`
	Cycles           int   `json:"checkpoint_restart_cycles"`
	// OwnerRestarts: jobs their fences killed, or lost with their nodes,
	// with only their owner's file to restart from, that the run
	// restarted from it as their owner (roam restart FILE).
	OwnerRestarts int            `json:"owner_restarts"`
	Faults        map[string]int `json:"faults"`
	JobsFinished  int            `json:"jobs_finished"`
	Lost          int            `json:"lost"`
	RunTwice      int            `json:"run_twice"`
	MaxRSSMB      float64        `json:"max_agent_rss_mb"`
	MaxFDs        int            `json:"max_agent_fds"`
	Seconds       float64        `json:"seconds"`
}

// FaultCount is the sum of the faults injected.
func (r ChaosResult) FaultCount() int {
	n := 0
	for _, k := range r.Faults {
		n += k
	}
	return n
}

// String is the counts, one line each.
func (r ChaosResult) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "seed %d: %d steps in %.0f s\n", r.Seed, r.Steps, r.Seconds)
	fmt.Fprintf(&b, "migrations: %d (and %d refused or failed under faults)\n", r.Migrations, r.MigrationsFailed)
	fmt.Fprintf(&b, "checkpoint/restart cycles: %d; restarts by the owner of a job fenced or lost: %d\n", r.Cycles, r.OwnerRestarts)
	fmt.Fprintf(&b, "faults: %d:", r.FaultCount())
	for _, k := range faultKinds {
		fmt.Fprintf(&b, " %s %d", k, r.Faults[k])
	}
	fmt.Fprintf(&b, "\njobs finished: %d; lost %d; run twice %d\n", r.JobsFinished, r.Lost, r.RunTwice)
	fmt.Fprintf(&b, "agents: at most %.0f MiB resident, %d descriptors\n", r.MaxRSSMB, r.MaxFDs)
	return b.String()
}

// Violation is a broken invariant: the run stops at it.
type Violation struct {
	Seed int64
	Step int
	Did  string // the step
	What string // what was seen
}

func (v *Violation) Error() string {
	return fmt.Sprintf("invariant broken: seed %d, step %d (%s): %s (roam bench chaos --seed %d replays the schedule)", v.Seed, v.Step, v.Did, v.What, v.Seed)
}

// chaos is a run in progress.
type chaos struct {
	spec     ChaosSpec
	rng      *rand.Rand
	st       emu.State
	root     []*api.Client // per node, as root
	user     []*api.Client // per node, as BenchUser
	dir      string        // the jobs' files, shared by every node
	jobs     map[string]*chaosJob
	res      ChaosResult
	step     int
	did      string
	progress io.Writer
}

// Chaos brings up the cluster, runs the schedule until the counts are
// reached, waits for the last jobs to end, checks them, and tears the
// cluster down. A broken invariant returns a *Violation.
func Chaos(spec ChaosSpec, progress io.Writer) (ChaosResult, error) {
	began := time.Now()
	res, err := chaosRun(spec, progress)
	res.Seconds = time.Since(began).Seconds()
	return res, err
}

func chaosRun(spec ChaosSpec, progress io.Writer) (ChaosResult, error) {
	x := &chaos{spec: spec, rng: rand.New(rand.NewPCG(uint64(spec.Seed), 45)), jobs: map[string]*chaosJob{}, progress: progress}
	x.res = ChaosResult{Seed: spec.Seed, Faults: map[string]int{}}
	fmt.Fprintf(progress, "chaos: seed %d (--seed %d replays the schedule)\n", spec.Seed, spec.Seed)
	_ = emu.Down(spec.Name)
	var err error
	x.st, err = up(emu.Spec{Name: spec.Name, Nodes: 4, Subnet: spec.Subnet, Roamd: spec.Roamd, Scheduler: "static", StateMB: spec.StateMB, Fence: chaosFence,
		AgentYAML: []byte(fmt.Sprintf("limits:\n  disk_reserve_bytes: %d\n", chaosReserveMB<<20))})
	if err != nil {
		return x.res, err
	}
	defer down(spec.Name)
	for _, n := range x.st.Nodes {
		sock := n.Socket
		x.root = append(x.root, api.NewClient(sock))
		x.user = append(x.user, api.NewClientDial(sock, func() (net.Conn, error) { return asuser.DialUnix(BenchUser, sock) }))
	}
	if err := waitMembers(x.root[0], 4); err != nil {
		return x.res, err
	}
	if x.dir, err = os.MkdirTemp("/var/lib", "roam-chaos-"); err != nil {
		return x.res, err
	}
	defer os.RemoveAll(x.dir)
	if err := os.Chown(x.dir, int(BenchUser.UID), int(BenchUser.GID)); err != nil {
		return x.res, err
	}
	if err := os.Chmod(x.dir, 0o755); err != nil {
		return x.res, err
	}
	err = x.run()
	if err != nil {
		x.keepLogs()
	}
	return x.res, err
}

// keepLogs copies every agent's log out of the cluster's directory, which
// the teardown removes, for the violation's story.
func (x *chaos) keepLogs() {
	dir := filepath.Join(os.TempDir(), fmt.Sprintf("roam-chaos-%d", x.spec.Seed))
	if os.MkdirAll(dir, 0o755) != nil {
		return
	}
	for _, n := range x.st.Nodes {
		if b, err := os.ReadFile(filepath.Join(n.Dir, "roamd.log")); err == nil {
			_ = os.WriteFile(filepath.Join(dir, "n"+n.ID+".log"), b, 0o644)
		}
	}
	fmt.Fprintf(x.progress, "chaos: the agents' logs are in %s\n", dir)
}

// run is the schedule: a step, then the checks, until the counts are
// reached; then the last jobs run to their end.
func (x *chaos) run() error {
	x.did = "start"
	if err := x.topUp(); err != nil {
		return err
	}
	if err := x.settle(); err != nil {
		return err
	}
	idle := time.Now()
	for !x.done() {
		// A step needs running jobs: without any (all finished and
		// their successors starting), wait for them, not step.
		if len(x.running()) == 0 {
			if time.Since(idle) > 2*time.Minute {
				return x.violation("no job has run for 2 minutes: starts refused")
			}
			time.Sleep(200 * time.Millisecond)
			if err := x.topUp(); err != nil {
				return err
			}
			if err := x.settle(); err != nil {
				return err
			}
			continue
		}
		idle = time.Now()
		x.step++
		x.res.Steps = x.step
		hung := watch(chaosStepLimit, func() { quitAgents(x.spec.Name) })
		err := x.oneStep()
		if err == nil {
			err = x.settle()
		}
		if hung() {
			return x.violation("the step took over %s (%v): each agent's goroutines are in its log", chaosStepLimit, err)
		}
		if err != nil {
			return err
		}
		if !x.done() {
			if err := x.topUp(); err != nil {
				return err
			}
		}
	}
	x.did = "the end"
	return x.finish()
}

// done says whether the counts are reached.
func (x *chaos) done() bool {
	return x.res.Migrations >= x.spec.Migrations && x.res.Cycles >= x.spec.Cycles && len(x.faultsLeft()) == 0
}

// faultQuota is the faults of each kind a run makes: a quarter of
// Faults, rounded up.
func (x *chaos) faultQuota() int { return (x.spec.Faults + len(faultKinds) - 1) / len(faultKinds) }

// faultsLeft lists the fault kinds short of their quota, each as many
// times as it is short.
func (x *chaos) faultsLeft() []string {
	var left []string
	for _, k := range faultKinds {
		for n := x.res.Faults[k]; n < x.faultQuota(); n++ {
			left = append(left, k)
		}
	}
	return left
}

// oneStep draws a step and does it: a migration, a checkpoint/restart
// cycle or a fault, in proportion to what is left of the counts (so
// that the run reaches them all at about the same step, not waiting for
// the rarest); a fault's kind among those short of their quota.
func (x *chaos) oneStep() error {
	mig, cyc := max(x.spec.Migrations-x.res.Migrations, 0), max(x.spec.Cycles-x.res.Cycles, 0)
	kinds := x.faultsLeft()
	if mig+cyc+len(kinds) == 0 {
		return nil // done
	}
	r := x.rng.IntN(mig + cyc + len(kinds))
	switch {
	case r < mig:
		return x.stepMigrate()
	case r < mig+cyc:
		return x.stepCycle()
	}
	switch kinds[x.rng.IntN(len(kinds))] {
	case "agent-kill":
		return x.faultKill()
	case "link-cut":
		return x.faultCut()
	case "disk-full":
		return x.faultFill()
	default:
		return x.faultCRIU()
	}
}

// note writes a line of progress: the step and what it did.
func (x *chaos) note(format string, a ...any) {
	x.did = fmt.Sprintf(format, a...)
	fmt.Fprintf(x.progress, "[chaos %d, %d mig, %d cyc, %d faults] %s\n", x.step, x.res.Migrations, x.res.Cycles, x.res.FaultCount(), x.did)
}

// violation stops the run.
func (x *chaos) violation(format string, a ...any) error {
	return &Violation{Seed: x.spec.Seed, Step: x.step, Did: x.did, What: fmt.Sprintf(format, a...)}
}

// node is the index of node id.
func (x *chaos) node(id string) int {
	for i, n := range x.st.Nodes {
		if n.ID == id {
			return i
		}
	}
	return 0
}

// running lists the jobs running now (by the last check), sorted, so that
// the seed picks the same one again.
func (x *chaos) running() []*chaosJob {
	var out []*chaosJob
	for _, j := range x.jobs {
		if j.rec.State == api.StateRunning && !j.over {
			out = append(out, j)
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].seq < out[b].seq })
	return out
}

// pickJob picks a running job, or nil.
func (x *chaos) pickJob() *chaosJob {
	js := x.running()
	if len(js) == 0 {
		return nil
	}
	return js[x.rng.IntN(len(js))]
}

// otherNode picks a node other than id.
func (x *chaos) otherNode(id string) string {
	i := x.node(id)
	return x.st.Nodes[(i+1+x.rng.IntN(len(x.st.Nodes)-1))%len(x.st.Nodes)].ID
}
