package rounds

import (
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/api"
	"roam/internal/sched"
)

func policy(t *testing.T, name string) *sched.Scheduler {
	t.Helper()
	p, err := sched.ParsePolicy([]byte(sched.Builtin[name]))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The config's policy gives way to any load; a load to a newer one only
// (the higher version, then the greater text); a reload of the config
// only while no load ran.
func TestTakeAndReconfigure(t *testing.T) {
	static, balance := policy(t, "static"), policy(t, "balance")
	r := New(static, 1)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	if old, ok := r.Reconfigure(balance, at); !ok || old.Scheduler != static {
		t.Fatalf("a reload before any load: %v, replaced %v", ok, old.Policy.Name)
	}
	if _, ok := r.Take(Policy{Scheduler: static, Version: 2, At: at}); !ok {
		t.Fatal("a load of version 2 over the config's was refused")
	}
	if _, ok := r.Take(Policy{Scheduler: balance, Version: 1, At: at}); ok {
		t.Fatal("an older load replaced a newer one")
	}
	if _, ok := r.Reconfigure(balance, at); ok {
		t.Fatal("a reload of the config replaced a loaded policy")
	}
	if got := r.Policy(); got.Scheduler != static || got.Version != 2 {
		t.Fatalf("runs %s version %d", got.Policy.Name, got.Version)
	}
	// One version loaded on two nodes at once: the greater text wins on
	// both, whichever came first.
	hi, lo := static, balance
	if lo.Text() > hi.Text() {
		hi, lo = lo, hi
	}
	if _, ok := r.Take(Policy{Scheduler: hi, Version: 3}); !ok {
		t.Fatal("version 3 refused")
	}
	if _, ok := r.Take(Policy{Scheduler: lo, Version: 3}); ok {
		t.Fatal("the lesser text of one version replaced the greater")
	}
}

// Complete fills a round's jobs in with their system calls per second
// since the last round, and the least CPU time of the runnable ones; a
// count that went back (a restored copy) says nothing.
func TestCompleteSamplesTheJobs(t *testing.T) {
	r := New(policy(t, "static"), 1)
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	probe := func(at time.Time, sys map[string]uint64) (sched.Snapshot, float64) {
		s := sched.Snapshot{Now: at}
		var ps []Probed
		for _, id := range []string{"a", "b", "c"} {
			run := 1
			if id == "c" {
				run = 0
			}
			ps = append(ps, Probed{Job: sched.Job{ID: id, Attained: map[string]float64{"a": 9, "b": 4, "c": 1}[id]}, Runnable: run, Syscalls: sys[id]})
		}
		least := r.Complete(&s, ps, []string{"a", "b", "c"})
		return s, least
	}
	s, least := probe(t0, map[string]uint64{"a": 100, "b": 100, "c": 100})
	if least != 4 || len(s.Jobs) != 3 || s.Jobs[0].SyscallsPerSec != 0 {
		t.Fatalf("first round: least %v (want 4: c is not runnable), jobs %+v", least, s.Jobs)
	}
	s, _ = probe(t0.Add(2*time.Second), map[string]uint64{"a": 300, "b": 50, "c": 100})
	if s.Jobs[0].SyscallsPerSec != 100 || s.Jobs[1].SyscallsPerSec != 0 {
		t.Fatalf("second round: %+v", s.Jobs)
	}
}

// A destination's refusal is recorded with the least CPU time it sent
// only when that is a number a node could send.
func TestDeclinedTakesOnlyASaneLeast(t *testing.T) {
	r := New(policy(t, "balance"), 1)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	mv := sched.Move{Job: "n1.1", From: "n1", To: "n2", At: now}
	for _, least := range []float64{-1, sched.MaxCPUSeconds * 2} {
		r.Declined(mv, sched.Node{ID: "n2", Capacity: 1, Load: 3, Least: least}, now)
		peers := []sched.Node{{ID: "n2", Capacity: 1, Load: 0}}
		s := sched.Snapshot{Now: now, Peers: peers}
		r.Complete(&s, nil, nil)
		if s.Peers[0].Least != 0 {
			t.Fatalf("least %v from a peer was taken as %v", least, s.Peers[0].Least)
		}
	}
}

// The loop runs a round each period, and on a kick only for a policy
// with a passive probe; moves that went through kick the next round at
// once; a closed stop ends it, and the group then waits for nothing.
func TestLoopPacesTheRounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, tc := range []struct {
			name    string
			passive bool
		}{{"static", false}, {"balance", true}} {
			pol := policy(t, tc.name)
			if pol.Passive() != tc.passive {
				t.Fatalf("%s: passive %v", tc.name, pol.Passive())
			}
			r := New(pol, 1)
			var mu sync.Mutex
			rounds := 0
			count := func() int { mu.Lock(); defer mu.Unlock(); return rounds }
			rd := Round{
				Snapshot: func() sched.Snapshot {
					mu.Lock()
					rounds++
					mu.Unlock()
					return sched.Snapshot{Now: time.Now()}
				},
				Decide: func(*sched.Scheduler, sched.Snapshot) []sched.Move { return nil },
				Move:   func(sched.Move) bool { return true },
			}
			stop := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(1)
			go r.Loop(stop, &wg, rd)
			synctest.Wait()
			if count() != 0 {
				t.Fatalf("%s: a round before the period or a kick", tc.name)
			}
			r.Kick()
			synctest.Wait()
			if got, want := count(), map[bool]int{false: 0, true: 1}[tc.passive]; got != want {
				t.Fatalf("%s: %d rounds after a kick, want %d", tc.name, got, want)
			}
			before := count()
			time.Sleep(time.Duration(pol.Policy.Period) + time.Millisecond)
			synctest.Wait()
			if count() != before+1 {
				t.Fatalf("%s: %d rounds a period later, want %d", tc.name, count(), before+1)
			}
			close(stop)
			wg.Wait()
		}
	})
}

// Moves of a round run in lanes; when one went through, the ledger kicks
// a round at once rather than a period later.
func TestARoundThatMovedKicksTheNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := New(policy(t, "balance"), 1)
		now := time.Now()
		moved := make(chan sched.Move, 2)
		var wg sync.WaitGroup
		r.Run(make(chan struct{}), &wg, r.Policy().Scheduler, Round{
			Snapshot: func() sched.Snapshot { return sched.Snapshot{Now: now} },
			Decide: func(*sched.Scheduler, sched.Snapshot) []sched.Move {
				return []sched.Move{{Job: "n1.1", From: "n1", To: "n2", At: now}, {Job: "n1.2", From: "n1", To: "n3", At: now}}
			},
			Move: func(mv sched.Move) bool { moved <- mv; return true },
		})
		wg.Wait()
		if len(moved) != 2 {
			t.Fatalf("%d moves carried out, want 2", len(moved))
		}
		select {
		case <-r.kick:
		default:
			t.Fatal("no kick after moves that went through")
		}
		if rec := r.Recent(now); len(rec) != 2 {
			t.Fatalf("recent moves %v", rec)
		}
	})
}

// The events log keeps the last MaxEvents, and Since gives those after a
// time, oldest first.
func TestEventsKeepTheLast(t *testing.T) {
	var ev Events
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range MaxEvents + 10 {
		ev.Add(api.Event{At: t0.Add(time.Duration(i) * time.Second), Why: strings.Repeat("x", i%3)})
	}
	all := ev.Since(time.Time{})
	if len(all) != MaxEvents || !all[0].At.Equal(t0.Add(10*time.Second)) {
		t.Fatalf("%d kept, first at %v", len(all), all[0].At)
	}
	if got := ev.Since(t0.Add(time.Duration(MaxEvents+7) * time.Second)); len(got) != 2 {
		t.Fatalf("%d after the third last", len(got))
	}
}
