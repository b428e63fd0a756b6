package sched

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"
)

// minAgeAlone is the default policy without crowd: every job waits
// min_age (2 s), as the default did before crowd.
func minAgeAlone(t *testing.T) string {
	t.Helper()
	text := strings.Replace(Builtin["mosix"], " crowd: 5, crowd_min_age: 250ms,", "", 1)
	if text == Builtin["mosix"] {
		t.Fatal("the mosix policy's text changed: minAgeAlone cannot take its crowd out")
	}
	return text
}

// A job younger than min_age leaves a crowded node, and only that: the
// default policy on the 0.2-CPU node of make demo's cluster.
func TestYoungJobsLeaveACrowdedNode(t *testing.T) {
	s := mustPolicy(t, "mosix")
	peers := []Node{{ID: "1", Capacity: 0.8, MemFreeMB: 4000}, {ID: "2", Capacity: 0.4, MemFreeMB: 4000}, {ID: "3", Capacity: 0.4, MemFreeMB: 4000}}
	snap := func(n int, age time.Duration) Snapshot {
		return Snapshot{Now: t0, Self: Node{ID: "4", Capacity: 0.2, Load: float64(n) / 0.2, MemFreeMB: 4000}, Peers: peers, Jobs: jobs(n, age)}
	}
	// Twelve jobs of 300 ms: the round spreads them as it would old
	// ones, eleven, judged by balance's threshold; each because its node
	// was crowded when the round began (60 against 7.5 at most).
	moves := s.Decide(snap(12, 300*time.Millisecond), rand.New(rand.NewSource(1)))
	if len(moves) != 11 {
		t.Fatalf("%d moves, want 11: %v", len(moves), moves)
	}
	for _, m := range moves {
		if m.Threshold != DefaultBalanceThreshold || !strings.Contains(m.Why, "age 300ms); under min_age 2s, but its node is crowded: its load 60.00 when the round began") {
			t.Fatalf("move %+v: want balance's threshold and a why that says the node was crowded", m)
		}
	}
	for _, tc := range []struct {
		what string
		n    int
		age  time.Duration
	}{
		{"twelve jobs under crowd_min_age", 12, 200 * time.Millisecond},
		{"a job alone (5 against 1.25 on node 1)", 1, time.Second},
		{"two jobs (10 against 1.25: crowded) of 240 ms", 2, 240 * time.Millisecond},
	} {
		if moves := s.Decide(snap(tc.n, tc.age), rand.New(rand.NewSource(1))); len(moves) != 0 {
			t.Errorf("%s: moved %v", tc.what, moves)
		}
	}
	// Two jobs of 250 ms (10 against 1.25): both leave, for nodes 1
	// and 2, as old ones would.
	if moves := s.Decide(snap(2, 250*time.Millisecond), rand.New(rand.NewSource(1))); len(moves) != 2 {
		t.Errorf("two jobs of 250 ms: moves %v, want two", moves)
	}
	// Two jobs on one CPU, an idle peer of one: 2 against 1, not crowded.
	two := Snapshot{Now: t0, Self: Node{ID: "1", Capacity: 1, Load: 2, MemFreeMB: 4000}, Peers: []Node{{ID: "2", Capacity: 1, MemFreeMB: 4000}}, Jobs: jobs(2, 1900*time.Millisecond)}
	if moves := s.Decide(two, rand.New(rand.NewSource(1))); len(moves) != 0 {
		t.Errorf("two jobs on one CPU: moved %v before min_age", moves)
	}
	two.Jobs = jobs(2, 2*time.Second)
	if moves := s.Decide(two, rand.New(rand.NewSource(1))); len(moves) != 1 || moves[0].Threshold != DefaultBalanceThreshold {
		t.Errorf("two jobs on one CPU at min_age: moves %v, want one, judged by balance's threshold", moves)
	}
	// Short of memory, a young job stays: crowd is about CPU.
	full := snap(12, 300*time.Millisecond)
	full.Self.MemFreeMB = 10
	for _, m := range s.Decide(full, rand.New(rand.NewSource(1))) {
		if m.Kind == ProblemMemory {
			t.Fatalf("a young job moved for memory: %+v", m)
		}
	}
}

// A round wakes when a job reaches crowd_min_age, then min_age.
func TestWakeAtCrowdMinAge(t *testing.T) {
	s := mustPolicy(t, "mosix")
	snap := Snapshot{Now: t0, Self: Node{ID: "4", Capacity: 0.2, Load: 10}, Jobs: jobs(2, 100*time.Millisecond)}
	if got, want := s.Wake(snap), t0.Add(150*time.Millisecond); !got.Equal(want) {
		t.Fatalf("Wake with jobs of 100 ms = %v, want %v (crowd_min_age)", got, want)
	}
	snap.Jobs = jobs(2, 300*time.Millisecond)
	if got, want := s.Wake(snap), t0.Add(1700*time.Millisecond); !got.Equal(want) {
		t.Fatalf("Wake with jobs of 300 ms = %v, want %v (min_age)", got, want)
	}
}

// The burst in the model (burstSim): twelve jobs of 2 CPU-seconds
// typed on the 0.2-CPU node of 0.8, 0.4, 0.4 and 0.2 CPUs (make demo's
// cluster, roam run -n 12 --on 4), moves that freeze a job for 300 ms
// (on real agents the burst's froze jobs 140 to 360 ms, four at once),
// ten seeds. With min_age alone the first move came at 2 s, the jobs
// balanced at 2.9 s and the run took 1.20 × the ideal (one run on real
// agents, timed around the attached roam run: 1.26; roam bench burst
// measures both policies). Under the default policy the first comes at a
// quarter second, and 1.08.
func TestDefaultPolicySpreadsABurstInTheModel(t *testing.T) {
	for _, tc := range []struct {
		what      string
		policy    string
		firstMove time.Duration
		ratio     float64
	}{
		{"default", Builtin["mosix"], 300 * time.Millisecond, 1.1},
		{"min_age alone", minAgeAlone(t), 2100 * time.Millisecond, 1.25},
	} {
		t.Run(tc.what, func(t *testing.T) {
			const seeds = 10
			var ratio, first, balanced float64
			for s := int64(1); s <= seeds; s++ {
				b := burstSim{nodes: 4, jobs: 12, caps: []float64{0.8, 0.4, 0.4, 0.2}, on: 3, work: 2, freeze: 300 * time.Millisecond, policy: tc.policy, seed: s}
				o := b.run(t)
				if o.firstMove < 0 || o.firstMove > tc.firstMove {
					t.Errorf("seed %d: first move at %v, want within %v", s, o.firstMove, tc.firstMove)
				}
				ratio += b.ratio(o) / seeds
				first += o.firstMove.Seconds() / seeds
				balanced += o.balanced.Seconds() / seeds
			}
			t.Logf("%.3f × the ideal, first move at %.2f s, balanced at %.2f s", ratio, first, balanced)
			if ratio > tc.ratio {
				t.Errorf("%.3f × the ideal, want at most %.2f", ratio, tc.ratio)
			}
		})
	}
}

// What min_age protects, in the model: jobs of heavy-tailed lengths
// (Pareto of index 1 from 10 ms to 20 CPU-seconds: most are short) typed
// on one node, forty draws each, under the default policy and under
// min_age alone, each against static placement (no move). A job alone,
// or a few sharing a node of their size, moves as it did with min_age
// alone: the same moves, the same ends. On a crowded node some short
// jobs move at a loss (they end later than with no move, by their
// freeze), more than with min_age alone, and the jobs' mean end falls.
// With the lengths of issue 43's sweep (0.2 to 20 CPU-seconds) none
// moves at a loss.
func TestYoungJobsLeaveOnlyACrowdedNode(t *testing.T) {
	demo := []float64{0.8, 0.4, 0.4, 0.2}
	for _, tc := range []struct {
		what    string
		caps    []float64
		on, n   int
		crowded bool
		harmed  float64 // when crowded: at most, moved at a loss per job
		least   float64 // the jobs' least length, CPU-seconds
	}{
		{"1 job on the 0.2-CPU node", demo, 3, 1, false, 0, 0.01},
		{"4 jobs on the 0.8-CPU node", demo, 0, 4, false, 0, 0.01},
		{"2 jobs on one of 2 nodes of 1 CPU", []float64{1, 1}, 0, 2, false, 0, 0.01},
		{"8 jobs on one of 4 nodes of 4 CPUs", []float64{4, 4, 4, 4}, 0, 8, false, 0, 0.01},
		// Ten a CPU, but most have ended by 250 ms.
		{"40 jobs on one of 4 nodes of 4 CPUs", []float64{4, 4, 4, 4}, 0, 40, false, 0, 0.01},
		{"3 jobs on the 0.2-CPU node", demo, 3, 3, true, 0.25, 0.01},
		{"12 jobs on the 0.2-CPU node", demo, 3, 12, true, 0.15, 0.01},
		{"12 jobs of the sweep's lengths on the 0.2-CPU node", demo, 3, 12, true, 0, 0.2},
		{"40 jobs of the sweep's lengths on one of 4 nodes of 4 CPUs", []float64{4, 4, 4, 4}, 0, 40, true, 0, 0.2},
	} {
		t.Run(tc.what, func(t *testing.T) {
			const draws = 40
			var mean [2]float64
			var harmed [2]int
			same := true
			for d := int64(1); d <= draws; d++ {
				rng := rand.New(rand.NewSource(d))
				works := make([]float64, tc.n)
				for i := range works {
					works[i] = tc.least / (1 - rng.Float64()*(1-tc.least/20))
				}
				b := burstSim{nodes: len(tc.caps), jobs: tc.n, caps: tc.caps, on: tc.on, works: works, freeze: 200 * time.Millisecond, seed: d}
				b.policy = "static"
				st := b.run(t)
				var outs [2]simOutcome
				for k, pol := range []string{Builtin["mosix"], minAgeAlone(t)} {
					b.policy = pol
					outs[k] = b.run(t)
					mean[k] += outs[k].meanEnd.Seconds() / st.meanEnd.Seconds() / draws
					for i, end := range outs[k].ends {
						if outs[k].moved[i] && end > st.ends[i]+time.Millisecond {
							harmed[k]++
						}
					}
				}
				same = same && fmt.Sprint(outs[0].ends) == fmt.Sprint(outs[1].ends)
			}
			jobs := float64(draws * tc.n)
			t.Logf("default: mean end %.2f of static's, %.3f moved at a loss per job; min_age alone: %.2f, %.3f",
				mean[0], float64(harmed[0])/jobs, mean[1], float64(harmed[1])/jobs)
			switch {
			case !tc.crowded && !same:
				t.Errorf("the jobs ended otherwise than with min_age alone")
			case tc.crowded && mean[0] >= mean[1]:
				t.Errorf("mean end %.2f of static's, not below min_age alone's %.2f", mean[0], mean[1])
			case tc.crowded && float64(harmed[0])/jobs > tc.harmed:
				t.Errorf("%.3f moved at a loss per job, want at most %.2f", float64(harmed[0])/jobs, tc.harmed)
			}
		})
	}
}

// The feedback policy preempts after DefaultPreemptAfter; the default
// (mosix) does not, as measured in roam bench sweep; static never does
// (it moves no job in space or in time).
func TestPreemptAfterByPolicy(t *testing.T) {
	for name, want := range map[string]time.Duration{"feedback": DefaultPreemptAfter, "mosix": 0, "static": 0, "balance": 0} {
		s, err := ParsePolicy([]byte(Builtin[name]))
		if err != nil {
			t.Fatal(err)
		}
		if got := time.Duration(s.Policy.PreemptAfter); got != want {
			t.Errorf("policy %s: preempt_after %v, want %v", name, got, want)
		}
	}
}
