package bench

import (
	"math"
	"strings"
	"testing"
	"time"

	"roam/internal/api"
	"roam/internal/load"
)

// The spread time is when no node runs more than its share + 1: four
// jobs on node 1 of two nodes (shares 2 and 2) spread when node 1 runs 3,
// after the first move, and balance (within one of 2) after the second.
func TestSpreadBeforeBalanced(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	moved := func(s float64) []api.Migration {
		return []api.Migration{{At: at(s), From: "1", To: "2", TotalMS: 200, OK: true}}
	}
	js := []api.Job{
		{ID: "1.1", Node: "1", Started: t0, Ended: at(10)},
		{ID: "1.2", Node: "1", Started: t0, Ended: at(10)},
		{ID: "1.3", Node: "2", Started: t0, Ended: at(10), MigrationLog: moved(1)},
		{ID: "1.4", Node: "2", Started: t0, Ended: at(10), MigrationLog: moved(2)},
	}
	caps := map[string]float64{"1": 0.2, "2": 0.2}
	spread := settledAfter(js, caps, func(c int, share float64) bool { return float64(c) <= share+1 })
	if math.Abs(spread-1.2) > 1e-9 || math.Abs(BalancedAfter(js, caps)-2.2) > 1e-9 {
		t.Fatalf("spread after %g s, balanced after %g s; want 1.2 and 2.2", spread, BalancedAfter(js, caps))
	}
}

// The paired ratios: beneficial's first run over fifo's in each round,
// fifo's second over its first, as measures a round and a note with the
// interval.
func TestWideIntervals(t *testing.T) {
	run := func(bal float64) wideRun { return wideRun{balanced: bal, spread: bal, makespan: 20 + bal} }
	runs := map[load.Policy]map[int][][]wideRun{
		load.PolicyFIFO:       {32: {{run(4), run(4)}, {run(5), run(6)}, {run(6), run(6)}}},
		load.PolicyBeneficial: {32: {{run(2), run(2)}, {run(2.5), run(2)}, {run(3), run(3)}}},
	}
	r := &Result{}
	wideIntervals(r, runs, []int{32})
	m := r.Get("beneficial / fifo, same round", 32, "load-balancing time ratio")
	if m == nil || len(m.Values) != 3 || m.Mean != 0.5 {
		t.Fatalf("beneficial / fifo = %+v, want 0.5 in each of 3 rounds", m)
	}
	if n := r.Get("fifo run 2 / run 1, same cluster", 32, "load-balancing time ratio"); n == nil || math.Abs(n.Mean-(1+1.2+1)/3) > 1e-12 {
		t.Fatalf("fifo's noise = %+v", n)
	}
	if len(r.Notes) != 4 || !strings.Contains(r.Notes[0], "32 jobs, load-balancing time: beneficial / fifo 0.500 [0.500, 0.500] over 3 rounds") {
		t.Fatalf("notes %q", r.Notes)
	}
}
