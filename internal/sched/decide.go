package sched

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"sort"
	"time"

	"roam/internal/cpufeat"
	"roam/internal/resources"
)

// Snapshot is what a node's scheduler sees at one moment: its own state,
// its peers as its load vector has them, its jobs, and the moves it
// started lately. The agent fills it; nothing here reads the system.
type Snapshot struct {
	Now  time.Time
	Self Node
	// Peers are the alive nodes of the load vector.
	Peers []Node
	Jobs  []Job
	// Recent are this node's moves of the last few seconds: a peer's load
	// received before a move to it settled does not show that move yet.
	Recent []Move
	// left is the load the round's moves so far took off this node
	// (apply): Self.Load+left is its load when the round began.
	left float64
}

// Node is one node's load.
type Node struct {
	ID        string
	Capacity  float64 // cores
	Load      float64 // runnable threads per unit of capacity
	MemFreeMB float64
	// Received is when its load arrived (zero for the node itself).
	Received time.Time
	// Draining: roam node drain: its jobs leave, none is placed or moved
	// there (see Drain).
	Draining bool
	// Least is the least CPU time, in seconds, that a job running there
	// has had since it started, on every node it ran on (Job.Attained);
	// 0 when no job runs there, or when the node does not say. Turns
	// (ProblemTurn) read it.
	Least float64
	// MemJobsMB and MemHeldMB are what it gives its jobs' memory
	// requests and what those it holds or has admitted add up to
	// (NodeLoad's): every move needs room there (fits). 0 MemJobsMB:
	// not counted.
	MemJobsMB float64
	MemHeldMB float64
	// Waiting: its home's queue has jobs waiting for room
	// (load.Entry.Waiting; the node's own, from its last round).
	Waiting bool
	// CPU is what its CPU offers (its metadata): a job goes there only
	// when it has every feature of the CPU the job started on (fits).
	// Zero: it does not say, and every job fits.
	CPU cpufeat.Set
}

// Job is a job running on this node, with what moving it would cost.
type Job struct {
	ID        string
	Started   time.Time
	LastMoved time.Time // zero if it never moved
	Moves     int
	RSSMB     float64
	// Runnable is how many of its threads want a CPU now: what moving it
	// takes off this node's load.
	Runnable int
	// SyscallsPerSec is its rate of read and write system calls, which
	// cost it dearly once it runs away from home (seed 001 Table 2).
	SyscallsPerSec float64
	// Held says why no policy may move it ("" when one may): pinned at
	// `roam run --pin`, placed by hand with `roam migrate`, or found
	// unmovable by an earlier attempt.
	Held string
	// Manual: held because it was placed by hand, which a drain
	// overrides.
	Manual bool
	// Attained is the CPU time, in seconds, the job has had since it
	// started, on every node it ran on: its attained service, which turns
	// even out (ProblemTurn).
	Attained float64
	// MemReqMB is its memory request (roam run --mem), which its
	// destination must have room for; 0: none.
	MemReqMB float64
	// CPU is what the CPU its program started on offers
	// (job.Local.CPU): its image runs only where a CPU has as much.
	CPU cpufeat.Set
	// Within, when not nil, are the only nodes it may go to: those of the
	// Slurm allocation it serves (job.Local.Within).
	Within []string
}

// Move is a decision: migrate Job to node To, and why.
type Move struct {
	Job  string
	To   string
	From string
	Why  string
	At   time.Time
	By   string      // the manager that decided
	Kind ProblemKind // the problem's, so the destination judges it alike
	// RSSMB and Runnable are the job's, so the move's effect can be
	// folded into a snapshot.
	RSSMB    float64
	Runnable int
	// SrcLoad, Threshold, Gain and KeepFreeMB are what the move was
	// judged against, so that the destination can judge it again (Admit).
	SrcLoad   float64
	Threshold float64
	// Gain, when not 0, is how many times lower than the source's the
	// target's load with the job must be: a job that moved within the
	// hysteresis moves again only when that at least multiplies its share
	// of a CPU by Gain.
	Gain       float64
	KeepFreeMB float64
	// Lazy: migrate it with post-copy (the policy's lazy_mb): its pages
	// follow on demand after it runs on To.
	Lazy bool `json:",omitempty"`
	// Attained is the job's (Job.Attained): the target's Least counts it
	// until the job arrives.
	Attained float64 `json:",omitempty"`
	// Behind, for a turn, is the most CPU time a runnable job left at the
	// source has had: every job at the target must have had more, by the
	// turn's lead (fits).
	Behind float64 `json:",omitempty"`
	// TurnEvery, for a turn, is the source's policy's turn_every, from
	// which the lead is reckoned (turnLead).
	TurnEvery time.Duration `json:",omitempty"`
	// MemReqMB is the job's memory request (Job.MemReqMB): the target
	// needs room for it, and holds it from its admission on.
	MemReqMB float64 `json:",omitempty"`
	// CPU is the job's (Job.CPU): the target's CPU must have all of it
	// (fits), which the destination checks again against its own (Admit).
	CPU cpufeat.Set `json:",omitzero"`
	// Within is the job's (Job.Within), for the choice of a target here;
	// the destination checks its own membership of it from the job's
	// header, so it is not sent.
	Within []string `json:"-"`
}

// Check refuses a move whose numbers no policy makes: negative or not
// finite (a destination folds them into its reservations; a negative
// memory would make it look empty for the reservation's life).
func (m Move) Check() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"rss_mb", m.RSSMB}, {"src_load", m.SrcLoad}, {"threshold", m.Threshold}, {"gain", m.Gain}, {"keep_free_mb", m.KeepFreeMB},
		{"attained", m.Attained}, {"behind", m.Behind}, {"mem_req_mb", m.MemReqMB}} {
		if !(f.v >= 0 && f.v <= 1e12) {
			return fmt.Errorf("move of job %s: %s %v is not a number from 0 to 1e12", m.Job, f.name, f.v)
		}
	}
	if m.Runnable < 0 {
		return fmt.Errorf("move of job %s: runnable %d is negative", m.Job, m.Runnable)
	}
	if m.Attained > MaxCPUSeconds || m.Behind > MaxCPUSeconds {
		return fmt.Errorf("move of job %s: a CPU time over %g s", m.Job, float64(MaxCPUSeconds))
	}
	if m.Kind == ProblemTurn && (m.TurnEvery <= 0 || m.TurnEvery > MaxTurnEvery) {
		return fmt.Errorf("move of job %s: turn_every %v is not in (0, %v]", m.Job, m.TurnEvery, MaxTurnEvery)
	}
	return nil
}

// ProblemKind is what a node is short of. A move carries its problem's
// kind: the destination judges it again by the same rule (fits).
type ProblemKind string

// The kinds of problem the analyzers find.
const (
	// ProblemCPU: a peer would give a job a larger share of a CPU.
	ProblemCPU ProblemKind = "cpu"
	// ProblemMemory: free memory is short here; running out kills.
	ProblemMemory ProblemKind = "memory"
	// ProblemTurn: no peer would give a job a larger share of a CPU, but
	// one as loaded as this node after the move runs only jobs that have
	// had more CPU time than those here: the most advanced job here goes
	// there, and the ones left here, further behind, get its share
	// (least attained service). Eight equal jobs on six nodes leave two
	// nodes running two; without turns the last of them run alone for
	// half a job, and the run takes 1.5 job-lengths where 8/6 would do.
	ProblemTurn ProblemKind = "turn"
)

// DefaultTurnEvery is balance's turn_every: how often, at most, a turn
// moves a job between a node and a peer. The lead a target's jobs must
// have over the jobs left at the source is what the target's jobs gain
// over them in this time, at the two nodes' shares of a CPU per runnable
// thread (fits), and a job that moved (or whose move failed) within it
// does not turn. Eight jobs on six nodes of 0.2 CPU: the single jobs gain
// 0.1 CPU-second a second on the doubled ones, and a turn needs a lead of
// 0.6 CPU-seconds; a move freezes a job for a few hundred milliseconds, a
// twentieth of the 6 s. In the model of roam bench lvm
// (TestBurstSpreadsInTheModel), before a job that had just moved was kept
// from turning, 4 s gave 91.7, 94.5 and 93.1 % at 6, 5 and 7 nodes, 6 s
// 92.4, 95.2 and 95.3 %; with it, 6 s gives 95.9, 96.7 and 95.3 %.
// turn_every: 0 turns turns off.
const DefaultTurnEvery = 6 * time.Second

// MaxTurnEvery bounds turn_every, and a turn's TurnEvery from the wire.
const MaxTurnEvery = time.Hour

// TurnMaxRSSMB: a job with more resident memory does not turn. An eager
// move freezes a job about 2.7 ms a MiB here (272 ms at 128 MiB, 2.8 s at
// 1 GiB: roam bench migrate, docs/benchmarks.md), and a turn's freeze should stay
// under a tenth of DefaultTurnEvery.
const TurnMaxRSSMB = 192

// TurnKeepFreeMB is what a turn's target must keep free with the job: a
// turn's target always runs jobs already (DefaultUsherFreeMB, ushering's
// floor, which would otherwise send the job on at once).
const TurnKeepFreeMB = DefaultUsherFreeMB

// MaxCPUSeconds bounds a CPU time from the wire (Move.Attained and
// Behind, Node.Least): a thousand years of a CPU, as the load message's
// (load.MaxLeast) and the migration header's (migrate.MaxCPUBefore).
const MaxCPUSeconds = 3.2e10

// TurnGain is how many times larger than at the source a runnable thread's
// share of a CPU must be at a turn's target: one job against two, or
// fewer against more. Between nodes whose shares differ less (three jobs
// against two, or nodes of unequal speed balanced as well as whole jobs
// allow) a turn would even out little for the freeze it costs, and the
// balancing benchmark's 12 jobs on 0.8, 0.4, 0.4 and 0.2 CPUs would take
// turns without end.
const TurnGain = 2

// known is whether k is one of the kinds above: a move's kind comes from
// another node, over the wire.
func (k ProblemKind) known() bool {
	return k == ProblemCPU || k == ProblemMemory || k == ProblemDrain || k == ProblemTurn
}

// Problem is a local problem an analyzer found.
type Problem struct {
	Analyzer string
	Kind     ProblemKind
	Why      string
	// Targets are the nodes that would solve it, best first.
	Targets []string
	// KeepFreeMB, for memory: a target must keep this much free after
	// taking the job.
	KeepFreeMB float64
	// Threshold, for cpu: how much lower than ours a target's load must
	// be after the move; the manager checks it again for the job it picks
	// (a job with several runnable threads weighs more than one).
	Threshold float64
	// TurnEvery, for a turn: the analyzer's turn_every.
	TurnEvery time.Duration
}

// Analyzer turns a snapshot into local problems. Implementations are pure.
type Analyzer interface {
	Analyze(s Snapshot) []Problem
}

// Manager picks at most one move for the problems found; the scheduler
// folds the move into the snapshot and asks again, up to MaxMoves times.
// Implementations are pure: the random source is the only randomness.
type Manager interface {
	Pick(s Snapshot, problems []Problem, rng *rand.Rand) (Move, bool)
	MaxMoves() int
	// Parallel is how many of its moves may run at once (Lanes).
	Parallel() int
}

// Factories of the component types a policy file may name. A new policy
// is a Go type implementing Analyzer or Manager and a line here.
var (
	analyzerTypes = map[string]func(params *yamlNode) (Analyzer, error){
		"balance":   newBalance,
		"ushering":  newUshering,
		"threshold": newThreshold,
	}
	managerTypes = map[string]func(params *yamlNode) (Manager, error){
		"migrate": newMigrateManager,
	}
)

// Scheduler is a built policy.
type Scheduler struct {
	Policy    Policy // not changed after Build (Text is made from it there)
	analyzers map[string]Analyzer
	managers  []namedManager
	text      string // Policy as YAML, made by Build: Text is asked on every gossip push/pull and policy compare
}

type namedManager struct {
	name   string
	m      Manager
	inputs []string
}

// MoveSettle is how long after a move the target's load shows it: its
// smoothed load (time constant one period) carries most of it by then. A
// load received before that is one the move is added to by hand, however
// old it is (the load vector's entries can be seconds old).
const MoveSettle = 2 * time.Second

// Effective returns the snapshot with this node's recent moves folded into
// its peers' loads where those loads are older than the moves' settling.
func Effective(s Snapshot) Snapshot {
	out := s
	out.Peers = slices.Clone(s.Peers)
	settle(out.Peers, s.Recent)
	return out
}

// settle is Effective on peers the caller owns, in place.
func settle(peers []Node, recent []Move) {
	for i := range peers {
		p := &peers[i]
		for _, m := range recent {
			if m.To == p.ID && p.Received.Before(m.At.Add(MoveSettle)) {
				p.take(m)
			}
		}
	}
}

// Decide runs one round of every manager of the policy: its analyzers
// find problems, it picks a move, the move is folded in, and again, up to
// its maximum. It returns the moves in order.
//
// A draining node's round is Drain's, whatever the policy; other nodes'
// policies do not see draining peers.
func (s *Scheduler) Decide(snap Snapshot, rng *rand.Rand) []Move {
	return s.DecideIn(snap, rng, nil)
}

// DecideIn is Decide, its copy of the peers made in *scratch's array
// when scratch is not nil, and that array left in *scratch for the next
// call: a simulator decides for every node every second, and the copies
// were half of what it allocated.
func (s *Scheduler) DecideIn(snap Snapshot, rng *rand.Rand, scratch *[]Node) []Move {
	if snap.Self.Draining {
		return Drain(snap)
	}
	// A copy of the caller's peers, made once: settle folds the recent
	// moves into it (Effective, without a second copy).
	var peers []Node
	if scratch != nil {
		peers = append((*scratch)[:0], snap.Peers...)
		*scratch = peers
	} else {
		peers = slices.Clone(snap.Peers)
	}
	snap.Peers = slices.DeleteFunc(peers, func(p Node) bool { return p.Draining })
	settle(snap.Peers, snap.Recent)
	var out []Move
	for _, nm := range s.managers {
		for k := 0; k < nm.m.MaxMoves(); k++ {
			var problems []Problem
			for _, in := range nm.inputs {
				for _, p := range s.analyzers[in].Analyze(snap) {
					p.Analyzer = in
					problems = append(problems, p)
				}
			}
			if len(problems) == 0 {
				break
			}
			mv, ok := nm.m.Pick(snap, problems, rng)
			if !ok {
				break
			}
			mv.At, mv.By = snap.Now, nm.name
			out = append(out, mv)
			snap = apply(snap, mv)
		}
	}
	return out
}

// waker is a manager that knows when a job it passes over now becomes
// one it may move.
type waker interface {
	Wake(s Snapshot) time.Time
}

// Wake is the first moment after snap.Now at which one of its jobs, too
// young now for a manager of the policy (min_age), becomes old enough to
// move; zero if none. The agent runs a round then rather than up to a
// period later: a burst started together would otherwise wait, on
// average, half a period more, all its jobs sharing one node's CPU.
func (s *Scheduler) Wake(snap Snapshot) time.Time {
	var w time.Time
	if snap.Self.Draining {
		return w
	}
	for _, nm := range s.managers {
		wk, ok := nm.m.(waker)
		if !ok {
			continue
		}
		if at := wk.Wake(snap); !at.IsZero() && (w.IsZero() || at.Before(w)) {
			w = at
		}
	}
	return w
}

// apply folds a move into a snapshot: the job leaves, this node's load
// drops and the target's rises by its runnable threads.
func apply(s Snapshot, mv Move) Snapshot {
	s.Jobs = slices.DeleteFunc(slices.Clone(s.Jobs), func(j Job) bool { return j.ID == mv.Job })
	s.Self.Load -= float64(mv.Runnable) / s.Self.Capacity
	s.left += float64(mv.Runnable) / s.Self.Capacity
	s.Self.MemFreeMB += mv.RSSMB
	s.Self.MemHeldMB = max(s.Self.MemHeldMB-mv.MemReqMB, 0)
	s.Peers = slices.Clone(s.Peers)
	for i := range s.Peers {
		if s.Peers[i].ID == mv.To {
			s.Peers[i].take(mv)
		}
	}
	return s
}

// take adds a move's job to a target's load and memory: at least one
// runnable thread, since a job sleeping now may run once there.
func (n *Node) take(mv Move) {
	n.Load = afterLoad(mv, *n)
	n.MemFreeMB -= mv.RSSMB
	n.MemHeldMB += mv.MemReqMB
	if n.Least <= 0 || mv.Attained < n.Least {
		n.Least = mv.Attained
	}
}

// ---- analyzers ----

// balance is MOSIX/openMosix pairwise balancing (seed 002 §2.1, seed 001
// §2.1): a peer whose load per unit of capacity, with one more process,
// would still be lower than ours by more than the threshold.
type balance struct {
	Threshold float64 `yaml:"threshold"`
	// TurnEvery is how often a job may turn (DefaultTurnEvery); 0: jobs
	// never take turns.
	TurnEvery Duration `yaml:"turn_every"`
}

func newBalance(n *yamlNode) (Analyzer, error) {
	b := &balance{Threshold: DefaultBalanceThreshold, TurnEvery: Duration(DefaultTurnEvery)}
	if err := decodeParams(n, b); err != nil {
		return nil, err
	}
	if b.Threshold < 0 {
		return nil, fmt.Errorf("threshold %v is negative", b.Threshold)
	}
	if b.TurnEvery < 0 || time.Duration(b.TurnEvery) > MaxTurnEvery {
		return nil, fmt.Errorf("turn_every %v is not in 0..%v (0: no turns)", time.Duration(b.TurnEvery), MaxTurnEvery)
	}
	return b, nil
}

func (b *balance) Analyze(s Snapshot) []Problem {
	type cand struct {
		id          string
		after, load float64
	}
	var cs []cand
	for _, p := range s.Peers {
		if p.Capacity <= 0 {
			continue
		}
		after := p.Load + 1/p.Capacity
		if s.Self.Load-after > b.Threshold {
			cs = append(cs, cand{p.ID, after, p.Load})
		}
	}
	if len(cs) == 0 {
		return b.turns(s)
	}
	// Least loaded after the move first; on a tie, the node less busy
	// now: a job on an idle node adds to the cluster's throughput, one
	// more on a busy node only shares it.
	sort.Slice(cs, func(i, j int) bool {
		if d := cs[i].after - cs[j].after; d < -1e-9 || d > 1e-9 {
			return d < 0
		}
		if cs[i].load != cs[j].load {
			return cs[i].load < cs[j].load
		}
		return IDLess(cs[i].id, cs[j].id)
	})
	targets := make([]string, len(cs))
	for i, c := range cs {
		targets[i] = c.id
	}
	return []Problem{{Kind: ProblemCPU, Targets: targets, Threshold: b.Threshold,
		Why: fmt.Sprintf("load %.2f on node %s; node %s would have %.2f with one more (threshold %.2f)",
			s.Self.Load, s.Self.ID, cs[0].id, cs[0].after, b.Threshold)}}
}

// turns is balance's problem when no peer would give a job a larger
// share of a CPU: the peers that would be no more loaded than this node
// is now with one more job, give a runnable thread TurnGain times its
// share here, and whose jobs have all had CPU time (Least), furthest
// ahead first. Which job goes, and whether the target
// is far enough ahead, is the manager's (Pick, fits): this node needs two
// runnable jobs at least, one to leave and one to gain.
func (b *balance) turns(s Snapshot) []Problem {
	if b.TurnEvery == 0 {
		return nil
	}
	runnable := 0
	for _, j := range s.Jobs {
		if j.Runnable > 0 {
			runnable++
		}
	}
	if runnable < 2 {
		return nil
	}
	var cs []Node
	for _, p := range s.Peers {
		if l := turnLoad(p); p.Capacity > 0 && l > 0 && p.Least > 0 && l+1/p.Capacity <= s.Self.Load+loadEpsilon && TurnGain*l <= s.Self.Load+loadEpsilon {
			cs = append(cs, p)
		}
	}
	if len(cs) == 0 {
		return nil
	}
	sort.Slice(cs, func(i, j int) bool {
		if cs[i].Least != cs[j].Least {
			return cs[i].Least > cs[j].Least
		}
		return IDLess(cs[i].ID, cs[j].ID)
	})
	targets := make([]string, len(cs))
	for i, c := range cs {
		targets[i] = c.ID
	}
	return []Problem{{Kind: ProblemTurn, Targets: targets, TurnEvery: time.Duration(b.TurnEvery),
		Why: fmt.Sprintf("load %.2f on node %s, no peer less loaded; node %s's jobs have had %.2f CPU-seconds at least",
			s.Self.Load, s.Self.ID, cs[0].ID, cs[0].Least)}}
}

// loadEpsilon is how much two loads may differ and still be called equal
// (a turn's target may be as loaded as its source was).
const loadEpsilon = 1e-9

// turnLoad is n's load as whole runnable threads per unit of capacity: a
// turn is between nodes whose job counts differ, and a peer's load in the
// vector is smoothed (a node running one job may say 1.05 of it), which
// would make the case turns are for, one job against two, fail its
// equalities by a hair.
func turnLoad(n Node) float64 {
	if n.Capacity <= 0 {
		return 0
	}
	return math.Round(n.Load*n.Capacity) / n.Capacity
}

// ushering is MOSIX's memory ushering (seed 001 §4.2): when free memory
// falls under a floor, a process goes to a node with room for it.
type ushering struct {
	MinFreeMB float64 `yaml:"min_free_mb"`
}

func newUshering(n *yamlNode) (Analyzer, error) {
	u := &ushering{MinFreeMB: DefaultUsherFreeMB}
	if err := decodeParams(n, u); err != nil {
		return nil, err
	}
	if u.MinFreeMB <= 0 {
		return nil, fmt.Errorf("min_free_mb %v must be positive", u.MinFreeMB)
	}
	return u, nil
}

func (u *ushering) Analyze(s Snapshot) []Problem {
	if s.Self.MemFreeMB >= u.MinFreeMB || boundByRequests(s, u.MinFreeMB) {
		return nil
	}
	peers := slices.Clone(s.Peers)
	sort.Slice(peers, func(i, j int) bool { return peers[i].MemFreeMB > peers[j].MemFreeMB })
	var targets []string
	for _, p := range peers {
		if p.MemFreeMB > 2*u.MinFreeMB {
			targets = append(targets, p.ID)
		}
	}
	if len(targets) == 0 {
		return nil
	}
	return []Problem{{Kind: ProblemMemory, Targets: targets, KeepFreeMB: u.MinFreeMB,
		Why: fmt.Sprintf("%.0f MiB free on node %s, under %.0f MiB; node %s has %.0f MiB",
			s.Self.MemFreeMB, s.Self.ID, u.MinFreeMB, peers[0].ID, peers[0].MemFreeMB)}}
}

// boundByRequests says the memory of s's node cannot run short: it
// admits jobs by their memory requests (MemJobsMB), those it holds fit in
// it together, every job here has one, which its cgroup holds it to, and
// the memory the node has (its jobs' resident memory and its free
// memory) covers what it admitted, less the floor: a node given more by
// jobs.memory_bytes than it has, or squeezed by processes that are not
// its jobs, is not bound so. Free memory under the floor is then the
// requests' own (a node packed by its queue), not a shortage: a move
// would freeze a job to free room that the queue fills at once. In roam
// bench sweep, with each job's class as its request, ushering moved 43
// to 62 jobs a round off nodes so packed, 11 to 19 s frozen in all.
func boundByRequests(s Snapshot, floorMB float64) bool {
	if s.Self.MemJobsMB <= 0 || s.Self.MemHeldMB > s.Self.MemJobsMB {
		return false
	}
	has := s.Self.MemFreeMB
	for _, j := range s.Jobs {
		if j.MemReqMB <= 0 {
			return false
		}
		has += j.RSSMB
	}
	return has >= s.Self.MemHeldMB-floorMB
}

// threshold is Kerrighed's example policy (seed 004 §4.2): CPU use over a
// threshold sends a process to the least-loaded node, if that node would
// be less loaded than this one.
type threshold struct {
	CPU float64 `yaml:"cpu"`
}

func newThreshold(n *yamlNode) (Analyzer, error) {
	t := &threshold{CPU: DefaultCPUThreshold}
	if err := decodeParams(n, t); err != nil {
		return nil, err
	}
	if t.CPU <= 0 {
		return nil, fmt.Errorf("cpu %v must be positive", t.CPU)
	}
	return t, nil
}

func (t *threshold) Analyze(s Snapshot) []Problem {
	if s.Self.Load <= t.CPU || len(s.Peers) == 0 {
		return nil
	}
	best := -1
	for i, p := range s.Peers {
		if p.Capacity > 0 && (best < 0 || p.Load < s.Peers[best].Load) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	p := s.Peers[best]
	if p.Load+1/p.Capacity >= s.Self.Load {
		return nil
	}
	return []Problem{{Kind: ProblemCPU, Targets: []string{p.ID},
		Why: fmt.Sprintf("CPU use %.0f%% on node %s over %.0f%%; least loaded is node %s (%.2f)",
			100*s.Self.Load, s.Self.ID, 100*t.CPU, p.ID, p.Load)}}
}

// ---- the manager ----

// migrateManager picks the job that is cheapest to move for a CPU
// problem (little memory, few system calls: seed 001 Table 2, seed 003
// §4.3), and the largest that fits for a memory problem; never a held
// job or one younger than MinAge, unless its node is crowded (Crowd). A
// job that moved within Hysteresis stays, unless a CPU move would
// multiply its share of a CPU by at least HysteresisGain: a job sent to a
// slow node that was idle then should not sit there for the whole
// hysteresis once a node four times faster is free. Such a move cannot be answered by a move back (that would need
// the reverse gain too), so it opens no door to ping-pong.
type migrateManager struct {
	MinAge     Duration `yaml:"min_age"`
	Hysteresis Duration `yaml:"hysteresis"`
	// HysteresisGain: 0 keeps every recently moved job where it is.
	HysteresisGain float64 `yaml:"hysteresis_gain"`
	Max            int     `yaml:"max_moves"`
	// Par is how many of the round's moves run at once, to as many
	// nodes.
	Par int `yaml:"parallel"`
	// SyscallMB is how many MiB of memory one system call per second
	// weighs in the cost of a move.
	SyscallMB float64 `yaml:"syscall_mb"`
	// LazyMB: a job whose resident memory is at least this many MiB moves
	// lazily (post-copy: frozen for its state alone, its pages fetched on
	// demand from the source, which stays until the last one came); 0:
	// every move is eager.
	LazyMB float64 `yaml:"lazy_mb"`
	// Crowd: a job younger than MinAge, but at least CrowdMinAge old,
	// may move for a CPU problem when the target's load with it is at
	// least Crowd runnable threads per unit of capacity below this
	// node's when the round began: a round that finds its node crowded
	// spreads its young jobs as far as it would spread old ones. 0: never
	// (DefaultCrowd says why the default policy sets it).
	Crowd       float64  `yaml:"crowd"`
	CrowdMinAge Duration `yaml:"crowd_min_age"`
}

func newMigrateManager(n *yamlNode) (Manager, error) {
	m := &migrateManager{MinAge: Duration(DefaultMinAge), Hysteresis: Duration(DefaultHysteresis),
		HysteresisGain: DefaultHysteresisGain, Max: DefaultMaxMoves, Par: DefaultParallel, SyscallMB: 1, CrowdMinAge: Duration(DefaultCrowdMinAge)}
	if err := decodeParams(n, m); err != nil {
		return nil, err
	}
	if m.Max < 1 || m.Max > 100 {
		return nil, fmt.Errorf("max_moves %d is not in 1..100", m.Max)
	}
	if m.Par < 1 || m.Par > 16 {
		return nil, fmt.Errorf("parallel %d is not in 1..16", m.Par)
	}
	if m.SyscallMB < 0 {
		return nil, fmt.Errorf("syscall_mb %v is negative", m.SyscallMB)
	}
	if m.LazyMB < 0 {
		return nil, fmt.Errorf("lazy_mb %v is negative (0: never lazy)", m.LazyMB)
	}
	if m.HysteresisGain != 0 && m.HysteresisGain < 1.5 {
		return nil, fmt.Errorf("hysteresis_gain %v is under 1.5 (0 turns it off)", m.HysteresisGain)
	}
	if m.Crowd < 0 {
		return nil, fmt.Errorf("crowd %v is negative (0: no job younger than min_age moves)", m.Crowd)
	}
	if m.Crowd > 0 && m.CrowdMinAge >= m.MinAge {
		return nil, fmt.Errorf("crowd_min_age %v is not under min_age %v: crowd would change nothing", time.Duration(m.CrowdMinAge), time.Duration(m.MinAge))
	}
	return m, nil
}

func (m *migrateManager) MaxMoves() int { return m.Max }
func (m *migrateManager) Parallel() int { return m.Par }

// movable is whether a policy may move j now for a problem of this kind;
// recent, whether it moved within the hysteresis: then only a CPU move
// with a large gain may take it; young, whether it is younger than
// MinAge: then only a CPU move to a target Crowd below this node (when
// the round began) may.
func (m *migrateManager) movable(s Snapshot, j Job, kind ProblemKind) (ok, recent, young bool) {
	if j.Held != "" {
		return false, false, false
	}
	if age := s.Now.Sub(j.Started); age < time.Duration(m.MinAge) {
		if kind != ProblemCPU || m.Crowd <= 0 || age < time.Duration(m.CrowdMinAge) {
			return false, false, false
		}
		young = true
	}
	recent = !j.LastMoved.IsZero() && s.Now.Sub(j.LastMoved) < time.Duration(m.Hysteresis)
	return !recent || (kind != ProblemMemory && m.HysteresisGain > 0), recent, young
}

// Wake is when the first job now younger than MinAge reaches it, or
// CrowdMinAge when Crowd is set (held jobs never move, whatever their
// age); zero if none.
func (m *migrateManager) Wake(s Snapshot) time.Time {
	var w time.Time
	for _, j := range s.Jobs {
		at := j.Started.Add(time.Duration(m.MinAge))
		if early := j.Started.Add(time.Duration(m.CrowdMinAge)); m.Crowd > 0 && early.After(s.Now) {
			at = early
		}
		if j.Held == "" && at.After(s.Now) && (w.IsZero() || at.Before(w)) {
			w = at
		}
	}
	return w
}

func (m *migrateManager) Pick(s Snapshot, problems []Problem, _ *rand.Rand) (Move, bool) {
	// Memory first: running out kills; a slow CPU only delays.
	sort.SliceStable(problems, func(i, j int) bool { return problems[i].Kind == ProblemMemory && problems[j].Kind != ProblemMemory })
	peers := map[string]Node{}
	for _, p := range s.Peers {
		peers[p.ID] = p
	}
	for _, pr := range problems {
		if pr.Kind == ProblemTurn {
			if mv, ok := m.pickTurn(s, pr, peers); ok {
				return mv, true
			}
			continue
		}
		var jobs []Job
		recent, young := map[string]bool{}, map[string]bool{}
		for _, j := range s.Jobs {
			ok, rec, yng := m.movable(s, j, pr.Kind)
			if ok && (pr.Kind == ProblemMemory || j.Runnable > 0) {
				jobs = append(jobs, j)
				recent[j.ID], young[j.ID] = rec, yng
			}
		}
		if len(jobs) == 0 {
			continue
		}
		cost := func(j Job) float64 { return j.RSSMB + m.SyscallMB*j.SyscallsPerSec }
		if pr.Kind == ProblemMemory {
			sort.Slice(jobs, func(a, b int) bool {
				if jobs[a].RSSMB != jobs[b].RSSMB {
					return jobs[a].RSSMB > jobs[b].RSSMB
				}
				return jobs[a].ID < jobs[b].ID
			})
		} else {
			// A job that has just moved goes last: it has paid once.
			sort.Slice(jobs, func(a, b int) bool {
				if ra, rb := recent[jobs[a].ID], recent[jobs[b].ID]; ra != rb {
					return rb
				}
				if ya, yb := young[jobs[a].ID], young[jobs[b].ID]; ya != yb {
					return yb
				}
				if ca, cb := cost(jobs[a]), cost(jobs[b]); ca != cb {
					return ca < cb
				}
				return jobs[a].ID < jobs[b].ID
			})
		}
		for _, to := range pr.Targets {
			t := peers[to]
			for _, j := range jobs {
				mv := Move{Job: j.ID, To: to, Kind: pr.Kind, RSSMB: j.RSSMB, Runnable: j.Runnable, MemReqMB: j.MemReqMB, CPU: j.CPU, Within: j.Within,
					From: s.Self.ID, SrcLoad: s.Self.Load, Threshold: pr.Threshold, KeepFreeMB: pr.KeepFreeMB}
				if recent[j.ID] {
					mv.Gain = m.HysteresisGain
				}
				mv.Lazy = m.LazyMB > 0 && j.RSSMB >= m.LazyMB
				if fits(mv, t) != nil || s.queueFills(mv, t) || young[j.ID] && s.Self.Load+s.left-afterLoad(mv, t) < m.Crowd {
					continue
				}
				age := s.Now.Sub(j.Started).Round(time.Second)
				if young[j.ID] {
					age = s.Now.Sub(j.Started).Round(10 * time.Millisecond)
				}
				mv.Why = fmt.Sprintf("%s: %s; moved job %s (%.0f MiB, %.0f syscalls/s, age %s)",
					pr.Analyzer, pr.Why, j.ID, j.RSSMB, j.SyscallsPerSec, age)
				if young[j.ID] {
					mv.Why += fmt.Sprintf("; under min_age %s, but its node is crowded: its load %.2f when the round began, the target's with it %.2f (crowd %.2f)",
						time.Duration(m.MinAge), s.Self.Load+s.left, afterLoad(mv, t), m.Crowd)
				}
				if recent[j.ID] {
					mv.Why += fmt.Sprintf("; it moved %s ago, and its CPU share grows %.1f times", s.Now.Sub(j.LastMoved).Round(time.Second), mv.SrcLoad/afterLoad(mv, t))
				}
				if mv.Lazy {
					mv.Why += fmt.Sprintf("; lazily, as it has at least %.0f MiB (lazy_mb)", m.LazyMB)
				}
				return mv, true
			}
		}
	}
	return Move{}, false
}

// pickTurn picks a turn: the runnable job that has had the most CPU time
// here leaves, to the first target whose jobs are all far enough ahead of
// the runnable jobs left here (fits); none if that job may not move: held,
// younger than MinAge, larger than TurnMaxRSSMB, or moved (or failed to)
// within the turn's TurnEvery (another job leaving would leave the most
// advanced one here, which is no turn). The manager's hysteresis does not
// hold it: the lead bounds how often jobs turn between two nodes. A job
// may turn back: it goes to a node whose jobs are ahead of the ones it
// leaves, and if it is the most advanced there too, it leaves again once
// the jobs it left have pulled ahead by a lead of their own (at most once
// a TurnEvery), which is what least attained service asks.
func (m *migrateManager) pickTurn(s Snapshot, pr Problem, peers map[string]Node) (Move, bool) {
	var run []Job
	for _, j := range s.Jobs {
		if j.Runnable > 0 {
			run = append(run, j)
		}
	}
	if len(run) < 2 {
		return Move{}, false
	}
	sort.Slice(run, func(a, b int) bool {
		if run[a].Attained != run[b].Attained {
			return run[a].Attained > run[b].Attained
		}
		return run[a].ID < run[b].ID
	})
	j := run[0]
	if j.Held != "" || s.Now.Sub(j.Started) < time.Duration(m.MinAge) || j.RSSMB > TurnMaxRSSMB ||
		(!j.LastMoved.IsZero() && s.Now.Sub(j.LastMoved) < pr.TurnEvery) {
		return Move{}, false
	}
	for _, to := range pr.Targets {
		mv := Move{Job: j.ID, To: to, From: s.Self.ID, Kind: ProblemTurn, RSSMB: j.RSSMB, Runnable: j.Runnable, MemReqMB: j.MemReqMB, CPU: j.CPU, Within: j.Within,
			SrcLoad: s.Self.Load, Attained: j.Attained, Behind: run[1].Attained, TurnEvery: pr.TurnEvery}
		mv.Lazy = m.LazyMB > 0 && j.RSSMB >= m.LazyMB
		if fits(mv, peers[to]) != nil || s.queueFills(mv, peers[to]) {
			continue
		}
		mv.Why = fmt.Sprintf("%s: %s; job %s, %.2f CPU-seconds, goes; the most a runnable job left here has had is %.2f",
			pr.Analyzer, pr.Why, j.ID, j.Attained, mv.Behind)
		return mv, true
	}
	return Move{}, false
}

// turnLead is the lead over the jobs left at the source that a turn needs
// of every job at target t: what t's jobs gain on them in TurnEvery, at
// t's share of a CPU per runnable thread (1/load) against the source's.
func turnLead(mv Move, t Node) float64 {
	return mv.TurnEvery.Seconds() * (1/turnLoad(t) - 1/mv.SrcLoad)
}

// fits says why target t would not take move mv, or nil: t's CPU must
// have every feature of the one the job started on (cpufeat: its image
// may use any of them); for memory, t must keep KeepFreeMB free after taking the job; for cpu, t's load with
// the job's runnable threads (at least one) must stay more than Threshold
// below the source's, and, for a job that moved lately, Gain times lower.
func fits(mv Move, t Node) error {
	if mv.Within != nil && !slices.Contains(mv.Within, t.ID) {
		return fmt.Errorf("job %s: node %s is not one of its Slurm allocation's", mv.Job, t.ID)
	}
	if err := cpufeat.Check(mv.CPU, t.CPU, t.ID); err != nil {
		return fmt.Errorf("job %s: %w", mv.Job, err)
	}
	if err := MemFits(t.ID, t.MemJobsMB, t.MemHeldMB, resources.Request{MemBytes: int64(mv.MemReqMB * (1 << 20))}); err != nil {
		return fmt.Errorf("job %s: %w", mv.Job, err)
	}
	if mv.Kind == ProblemMemory || mv.Kind == ProblemDrain {
		if left := t.MemFreeMB - mv.RSSMB; left < mv.KeepFreeMB {
			return fmt.Errorf("node %s would have %.0f MiB free with job %s, under the %.0f MiB to keep", t.ID, left, mv.Job, mv.KeepFreeMB)
		}
		return nil
	}
	after := afterLoad(mv, t)
	if mv.Kind == ProblemTurn {
		tl := turnLoad(t)
		switch {
		case t.Capacity <= 0 || tl <= 0 || t.Least <= 0:
			return fmt.Errorf("node %s runs no job that has had CPU time: a turn of job %s needs jobs ahead of it there", t.ID, mv.Job)
		case tl+float64(max(mv.Runnable, 1))/t.Capacity > mv.SrcLoad+loadEpsilon:
			return fmt.Errorf("node %s would have load %.2f with job %s, above node %s's %.2f: a turn must not load it more", t.ID, after, mv.Job, mv.From, mv.SrcLoad)
		case TurnGain*tl > mv.SrcLoad+loadEpsilon:
			return fmt.Errorf("node %s's load %.2f is not %d times below node %s's %.2f: a turn of job %s would even out too little", t.ID, t.Load, TurnGain, mv.From, mv.SrcLoad, mv.Job)
		case t.MemFreeMB-mv.RSSMB < TurnKeepFreeMB:
			return fmt.Errorf("node %s would have %.0f MiB free with job %s, under the %.0f MiB a turn keeps", t.ID, t.MemFreeMB-mv.RSSMB, mv.Job, float64(TurnKeepFreeMB))
		case t.Least-mv.Behind < turnLead(mv, t):
			return fmt.Errorf("node %s's jobs have had %.2f CPU-seconds at least, node %s's left %.2f at most: a turn of job %s needs a lead of %.2f", t.ID, t.Least, mv.From, mv.Behind, mv.Job, turnLead(mv, t))
		}
		return nil
	}
	if mv.SrcLoad-after <= mv.Threshold {
		return fmt.Errorf("node %s would have load %.2f with job %s, not more than %.2f below node %s's %.2f", t.ID, after, mv.Job, mv.Threshold, mv.From, mv.SrcLoad)
	}
	if mv.Gain > 0 && mv.SrcLoad < mv.Gain*after {
		return fmt.Errorf("node %s would have load %.2f with job %s, which moved lately: not %.2f times below node %s's %.2f", t.ID, after, mv.Job, mv.Gain, mv.From, mv.SrcLoad)
	}
	return nil
}

// afterLoad is target t's load with the move's job (at least one runnable
// thread, since a job sleeping now may run once there).
func afterLoad(mv Move, t Node) float64 {
	return t.Load + float64(max(mv.Runnable, 1))/t.Capacity
}

// Admit is the destination's own check of a move a source's policy
// decided from its load vector, against the destination's load now (self,
// with the moves it has admitted and not yet received counted in): a
// vector entry can be a second old, and two sources that saw the same idle
// node would both send it a job (herding). nil: take it.
func Admit(mv Move, self Node) error {
	if !mv.Kind.known() {
		return fmt.Errorf("move of job %s: unknown kind %q (%s, %s, %s or %s)", mv.Job, mv.Kind, ProblemCPU, ProblemMemory, ProblemDrain, ProblemTurn)
	}
	if self.Draining {
		return fmt.Errorf("node %s is draining (roam node drain): it takes no job", self.ID)
	}
	return fits(mv, self)
}

// queueFills says a move of mv to t would take room a home's queue waits
// for: while any node's queue waits for room (Node.Waiting), the room
// for memory requests that comes free is the queue's to fill, and a move
// for CPU into it gains nothing a start there would not (the room it
// leaves is filled at once in its turn), for a freeze and CRIU's work. In
// roam bench sweep, 123 of 139 moves left the loaded node for room just
// freed, which the queue refilled at once. Memory ushering and drains
// move for the node's sake, and go on; so does a job without a memory
// request, or to a node that admits none.
func (s *Snapshot) queueFills(mv Move, t Node) bool {
	if mv.MemReqMB <= 0 || t.MemJobsMB <= 0 || mv.Kind == ProblemMemory || mv.Kind == ProblemDrain {
		return false
	}
	if s.Self.Waiting {
		return true
	}
	for _, p := range s.Peers {
		if p.Waiting {
			return true
		}
	}
	return false
}
