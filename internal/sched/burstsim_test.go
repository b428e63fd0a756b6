package sched

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"roam/internal/load"
)

// burstSim is an in-process model of `roam bench lvm`: equal CPU-bound
// jobs, all started on the first of N equal nodes, spread by migration
// alone. It runs, on a fake clock, the functions the agent runs:
//
//   - the load loop (Agent.step): every quarter interval, and at once when
//     one of its jobs ends or leaves (Agent.kickLoad), each node counts its
//     running jobs; it sends that count at once, unsmoothed, to the
//     busier nodes when a job ended or left (Disseminator.News), and
//     smooths it otherwise (load.Smooth); it sends its load to the nodes
//     Disseminator.Tick picks. A receiver keeps an entry as
//     Disseminator.Receive says, and runs a round at once when the entry
//     eases (Disseminator.Eased, or Ledger.Eased for a node that refused
//     it a move);
//   - the scheduler loop (Agent.schedule, round and move): a round runs at
//     the policy's period, when a job starts, arrives or ends on the node
//     (a passive policy), at the last round's wake (Scheduler.Wake), and
//     after its moves finish (Ledger.Started, Ledger.Finished). Its
//     snapshot has the node's jobs and load, its vector's entries with the
//     heard loads applied (Ledger.ApplyHeard) and its recent moves
//     (Ledger.Recent). The destination judges each move
//     (Ledger.Admit); a refused one is forgotten and its answer heard
//     (Ledger.Forget, Ledger.Declined).
//
// A move freezes its job for a fixed time, in the policy's lanes. A node
// shares its capacity equally among the jobs running on it. Nothing
// fails, and memory is plenty. The agent's own costs (CRIU, the calls
// between agents) are the freeze alone.
type burstSim struct {
	nodes, jobs int
	capacity    float64   // each node's, in cores
	caps        []float64 // each node's, when they differ (capacity then unused)
	on          int       // the node the jobs start on (roam run --on), from 0
	work        float64   // each job's, in CPU-seconds
	works       []float64 // each job's, when they differ (work then unused)
	freeze      time.Duration
	policy      string // a built-in policy's name, or a policy file's text
	seed        int64
}

// cap is node i's capacity.
func (b burstSim) cap(i int) float64 {
	if b.caps != nil {
		return b.caps[i]
	}
	return b.capacity
}

// workOf is job k's work.
func (b burstSim) workOf(k int) float64 {
	if b.works != nil {
		return b.works[k]
	}
	return b.work
}

// totalCap is the cluster's capacity; totalWork the jobs' work.
func (b burstSim) totalCap() float64 {
	t := 0.0
	for i := range b.nodes {
		t += b.cap(i)
	}
	return t
}

func (b burstSim) totalWork() float64 {
	t := 0.0
	for k := range b.jobs {
		t += b.workOf(k)
	}
	return t
}

type burstJob struct {
	id        string
	node      int // where it runs, or comes to
	work      float64
	done      float64
	lastMoved time.Time
	moves     int
	arrives   time.Time // while moving: frozen until then
	moving    bool
	ended     time.Time
}

type burstNode struct {
	id      string
	dis     *load.Disseminator
	ledger  Ledger
	smooth  float64
	next    time.Time // the period's round
	wake    time.Time
	kick    bool
	running time.Time // its round's moves run until then
	// fell is when it probes out of turn: a job ended here (once its
	// home has the end, endSeen later) or left (when its move commits,
	// as the destination resumes it).
	fell  time.Time
	probe time.Time // its last probe
}

// simOutcome is what one run of a burstSim measured.
type simOutcome struct {
	makespan time.Duration
	// balanced is when every node first ran within one job of its share
	// (the bench's load-balancing time).
	balanced time.Duration
	// idle is node-seconds, once balanced, a node ran nothing while a job
	// waited for a CPU on another (jobs ended there; one job per idle
	// node could have moved).
	idle  float64
	moves int
	// firstMove is when the first move started (-1: none).
	firstMove time.Duration
	// meanEnd is the jobs' mean time to their ends.
	meanEnd time.Duration
	// ends are the jobs' ends, and moved whether each moved, in the
	// order of the jobs.
	ends  []time.Duration
	moved []bool
}

func (b burstSim) efficiency(o simOutcome) float64 {
	return b.totalWork() / (b.totalCap() * o.makespan.Seconds())
}

// ratio is the makespan over the ideal (the work over the capacity).
func (b burstSim) ratio(o simOutcome) float64 {
	return o.makespan.Seconds() / (b.totalWork() / b.totalCap())
}

func (b burstSim) run(t *testing.T) simOutcome {
	t.Helper()
	text, ok := Builtin[b.policy]
	if !ok {
		text = b.policy
	}
	sch, err := ParsePolicy([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	lp, err := load.ParsePolicy("fifo")
	if err != nil {
		t.Fatal(err)
	}
	const (
		dt = 5 * time.Millisecond
		// endSeen is how long after a job ends its node's agent probes:
		// it finds the end (at once, or at its 50 ms poll for a job that
		// came by migration), pushes it to the home, and probes once the
		// home has acknowledged it (Agent.applyAcks).
		endSeen  = 50 * time.Millisecond
		interval = time.Second // load.DefaultInterval, as the bench runs
		probe    = interval / 4
	)
	period := time.Duration(sch.Policy.Period)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rng := rand.New(rand.NewSource(b.seed))
	ns := make([]*burstNode, b.nodes)
	var members []string
	for i := range ns {
		id := fmt.Sprintf("n%d", i+1)
		ns[i] = &burstNode{id: id, dis: load.NewDisseminator(id, load.DefaultVectorSize, lp, interval),
			next: t0.Add(time.Duration(rng.Int63n(int64(period)))), probe: t0.Add(-probe)}
		members = append(members, id)
	}
	// The cluster has been up, idle, for a while: every node has every
	// other's entry, old.
	for _, n := range ns {
		for k, p := range ns {
			if p != n {
				n.dis.Receive(t0.Add(-10*time.Second), load.Entry{Node: p.id, Capacity: b.cap(k), MemFreeMB: 4000}, 0)
			}
		}
	}
	js := make([]*burstJob, b.jobs)
	for i := range js {
		js[i] = &burstJob{id: fmt.Sprintf("n%d.%d", b.on+1, i+1), node: b.on, work: b.workOf(i)}
	}
	ns[b.on].kick = true
	running := func(n int) int {
		k := 0
		for _, j := range js {
			if j.node == n && !j.moving && j.ended.IsZero() {
				k++
			}
		}
		return k
	}
	// least is the least CPU time a job running on node n has had (0:
	// none runs there): what its load entry and its answers say.
	least := func(n int) float64 {
		l := 0.0
		for _, j := range js {
			if j.node == n && !j.moving && j.ended.IsZero() && (l == 0 || j.done < l) {
				l = j.done
			}
		}
		return l
	}
	index := func(id string) int { return slices.IndexFunc(ns, func(p *burstNode) bool { return p.id == id }) }
	var out simOutcome
	out.balanced, out.firstMove = -1, -1

	for now := t0; now.Sub(t0) < 10*time.Minute; now = now.Add(dt) {
		// Arrivals.
		for _, j := range js {
			if j.moving && !now.Before(j.arrives) {
				j.moving, j.lastMoved = false, now
				ns[j.node].ledger.Arrived(j.id)
				ns[j.node].kick = true
			}
		}
		// The load loop: at every probe, and at once on a node where a
		// job ended.
		for i, n := range ns {
			if now.Sub(t0)%probe != 0 && (n.fell.IsZero() || now.Before(n.fell)) {
				continue
			}
			{
				n.fell = time.Time{}
				elapsed := now.Sub(n.probe)
				n.probe = now
				k := running(i)
				raw := float64(k) / b.cap(i)
				news := n.dis.News(now, k, raw, n.smooth, b.cap(i))
				if len(news) > 0 {
					n.smooth = raw
				} else {
					n.smooth = load.Smooth(n.smooth, raw, elapsed, interval)
				}
				to := n.dis.Tick(now, members, rng)
				for _, id := range news {
					if !slices.Contains(to, id) {
						to = append(to, id)
					}
				}
				// With the moves it admitted and has not yet received, as
				// its answers to moves count them (Agent.step).
				pending := n.ledger.Reserved(Node{Capacity: b.cap(i), Least: least(i)}, now)
				e := load.Entry{Node: n.id, Capacity: b.cap(i), Load: n.smooth + pending.Load, MemFreeMB: 4000, Least: pending.Least}
				for _, id := range to {
					r := ns[index(id)]
					prev, had := r.dis.Vector.Get(n.id)
					if r.dis.Receive(now, e, r.smooth) && (r.dis.Eased(now, prev, had, e, r.smooth) || r.ledger.Eased(e.Node, e.Load, e.Capacity, r.smooth)) {
						r.kick = true
					}
				}
			}
		}
		// The scheduler loop.
		for i, n := range ns {
			if !n.running.IsZero() {
				if now.Before(n.running) {
					continue
				}
				n.running = time.Time{}
				if n.ledger.Finished(true, now, n.wake) {
					n.kick = true
				}
			}
			if !n.kick && now.Before(n.next) && (n.wake.IsZero() || now.Before(n.wake)) {
				continue
			}
			n.kick, n.next = false, now.Add(period)
			snap := Snapshot{Now: now, Self: Node{ID: n.id, Capacity: b.cap(i), Load: float64(running(i)) / b.cap(i), MemFreeMB: 4000}}
			for _, e := range n.dis.Vector.Entries() {
				snap.Peers = append(snap.Peers, Node{ID: e.Node, Capacity: e.Capacity, Load: e.Load, MemFreeMB: e.MemFreeMB, Received: e.Received, Least: e.Least})
			}
			n.ledger.ApplyHeard(snap.Peers)
			snap.Recent = n.ledger.Recent(now)
			for _, j := range js {
				if j.node == i && !j.moving && j.ended.IsZero() {
					snap.Jobs = append(snap.Jobs, Job{ID: j.id, Started: t0, LastMoved: j.lastMoved, Moves: j.moves, RSSMB: 5, Runnable: 1, Attained: j.done})
				}
			}
			moves := sch.Decide(snap, rng)
			n.wake = sch.Wake(snap)
			n.ledger.Started(moves)
			lanes, started := sch.Parallel(), 0
			for _, mv := range moves {
				to := index(mv.To)
				d := ns[to]
				ans := d.ledger.Admit(mv, Node{ID: d.id, Capacity: b.cap(to), Load: float64(running(to)) / b.cap(to), MemFreeMB: 4000, Least: least(to)}, now)
				if ans.Refused != nil {
					// The answer comes after the vector's entries the
					// round used (in the agent, a call later).
					n.ledger.Forget(mv)
					n.ledger.Declined(mv, Node{ID: mv.To, Capacity: b.cap(to), Load: ans.Load, MemFreeMB: ans.MemFreeMB}, now.Add(time.Microsecond))
					continue
				}
				j := js[slices.IndexFunc(js, func(j *burstJob) bool { return j.id == mv.Job })]
				freeze := time.Duration(started/lanes+1) * b.freeze
				if out.firstMove < 0 {
					out.firstMove = now.Sub(t0)
				}
				j.node, j.moving, j.moves = to, true, j.moves+1
				j.arrives = now.Add(freeze)
				if j.arrives.After(n.running) {
					n.running = j.arrives
				}
				if n.fell.IsZero() || j.arrives.Before(n.fell) {
					n.fell = j.arrives
				}
				started++
				out.moves++
			}
			if started == 0 && len(moves) > 0 && n.ledger.Finished(false, now, n.wake) {
				n.kick = true
			}
		}
		// The jobs run; the measures.
		counts := make([]int, b.nodes)
		waiting, idle, left := 0, 0, 0
		for i := range ns {
			counts[i] = running(i)
			if counts[i] == 0 {
				idle++
			} else {
				waiting += counts[i] - 1
			}
			for _, j := range js {
				if j.node == i && !j.moving && j.ended.IsZero() {
					if j.done += b.cap(i) / float64(counts[i]) * dt.Seconds(); j.done >= j.work {
						j.ended = now.Add(dt)
						ns[i].kick, ns[i].fell = true, now.Add(endSeen)
					}
				}
			}
		}
		for _, j := range js {
			if j.ended.IsZero() {
				left++
			}
		}
		if out.balanced >= 0 {
			out.idle += float64(min(idle, waiting)) * dt.Seconds()
		} else {
			ok := true
			for i, c := range counts {
				share := float64(b.jobs) * b.cap(i) / b.totalCap()
				ok = ok && float64(c) < share+1 && float64(c) > share-1
			}
			// A job in flight counts where it goes.
			for _, j := range js {
				ok = ok && !j.moving
			}
			if ok {
				out.balanced = now.Sub(t0)
			}
		}
		if left == 0 {
			out.makespan = now.Add(dt).Sub(t0)
			for _, j := range js {
				out.meanEnd += j.ended.Sub(t0) / time.Duration(len(js))
				out.ends = append(out.ends, j.ended.Sub(t0))
				out.moved = append(out.moved, j.moves > 0)
			}
			return out
		}
	}
	t.Fatalf("%d jobs on %d nodes: not done after 10 minutes", b.jobs, b.nodes)
	return out
}

// The lvm burst in the model, with the bench's numbers (8 jobs of
// 3.58 s alone, nodes of 0.2 CPU, moves that freeze a job for 150 ms),
// over ten seeds: the balance policy spreads it in well under a second at
// every node count, a node whose jobs ended gets one of the jobs that
// wait elsewhere at once, and the run is as efficient as the jobs'
// placement allows. Eight jobs on six nodes leave two nodes with two:
// without jobs taking turns, the last two run alone for half a job, so
// the run takes 1.5 job-lengths where 8/6 would do, 88.9 % at best.
//
// The bounds are the model's own numbers, measured, with a little room:
// the model is deterministic. Each catches something (3 nodes, then 6):
// without a round at once after a refused move (Ledger.Finished), 6
// nodes ran at 79.1 % with 0.52 node-seconds idle; without the moves a
// node admitted in the load it sends (Agent.pendingLoad), 80.0 % and
// 0.39; without a probe at once when a job ends (Agent.kickLoad), 3 nodes
// idled 0.75 and 4 nodes 0.15; without news of a node gone idle whatever
// its smoothed load (Disseminator.News), 3 nodes idled 0.57; without a
// round when a node that refused a move has room again (Ledger.Eased),
// 1.07. roam bench lvm measured on real agents (docs/results/lvm-inits,
// before these): 98.5, 94.5, 95.5, 77.8 and 86.5 % at 2, 3, 4, 6 and 8
// nodes; the model then gave 97.4, 91.8, 95.5, 77.9 and 87.3.
//
// The full bench makes seed 000's 4,000 keys: its jobs run 27.75 s alone
// (measured, docs/results/lvm-4000-reps1: one node ran the eight in
// 222 s; more than five times 3.58 s), and there the same balancing
// weighs an eighth as much (the last rows). Without turns
// (sched.ProblemTurn), 6 nodes' bound was 88.9 %, and the model gave
// 99.7, 99.4, 99.2, 90.6, 87.9, 75.4 and 98.2 % at 2, 3, 4, 5, 6, 7 and 8
// nodes; that run measured 96.9/95.5, 93.8/96.1, 96.7/98.4, 87.0/83.3 and
// 89.4/91.4 % at 2, 3, 4, 6 and 8 (fifo/beneficial, one repetition each).
// With turns, the jobs of the doubled nodes take turns with the single
// ones: 5, 6 and 7 nodes reach 96.7, 95.9 and 95.3 % (the rows' minimums
// are above the old bounds; before a job that had just moved was kept from
// turning, 95.2, 92.4 and 95.3), the others stay as they were. Jobs of
// 3.58 s end before a turn's lead builds up.
func TestBurstSpreadsInTheModel(t *testing.T) {
	for _, tc := range []struct {
		nodes    int
		alone    float64 // s a job runs alone on a node: the bench's 800 keys, then 4,000
		min, max float64 // efficiency
		idle     float64 // node-seconds, at most
	}{
		{2, 3.58, 0.96, 1, 0.2}, {3, 3.58, 0.93, 1, 0.5}, {4, 3.58, 0.93, 1, 0.1}, {6, 3.58, 0.81, 8.0 / 9, 0.15}, {8, 3.58, 0.85, 1, 0.05},
		{2, 27.75, 0.98, 1, 0.2}, {3, 27.75, 0.98, 1, 0.5}, {4, 27.75, 0.98, 1, 0.1}, {5, 27.75, 0.96, 1, 0.5}, {6, 27.75, 0.95, 1, 0.3},
		{7, 27.75, 0.95, 1, 0.5}, {8, 27.75, 0.96, 1, 0.05},
	} {
		t.Run(fmt.Sprintf("%d nodes, jobs of %.2f s", tc.nodes, tc.alone), func(t *testing.T) {
			const seeds = 10
			var eff, balanced, idle float64
			for s := int64(1); s <= seeds; s++ {
				b := burstSim{nodes: tc.nodes, jobs: 8, capacity: 0.2, work: tc.alone * 0.2, freeze: 150 * time.Millisecond, policy: "balance", seed: s}
				o := b.run(t)
				if o.balanced < 0 {
					t.Fatalf("seed %d: never balanced", s)
				}
				eff += b.efficiency(o) / seeds
				balanced += o.balanced.Seconds() / seeds
				idle += o.idle / seeds
			}
			t.Logf("efficiency %.1f %%, balanced after %.2f s, %.2f node-seconds idle while a job waited", 100*eff, balanced, idle)
			if eff < tc.min || eff > tc.max {
				t.Errorf("efficiency %.1f %%, want %.1f to %.1f %%", 100*eff, 100*tc.min, 100*tc.max)
			}
			if balanced > 0.6 {
				t.Errorf("balanced after %.2f s on average, want at most 0.6 s (min_age 250 ms, then the moves)", balanced)
			}
			if idle > tc.idle {
				t.Errorf("%.2f node-seconds idle while a job waited, want at most %.2f", idle, tc.idle)
			}
		})
	}
}
