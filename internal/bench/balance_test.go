package bench

import (
	"testing"
	"time"

	"roam/internal/api"
)

// BalancedAt: twelve jobs start on node 4 of capacities 0.8/0.4/0.4/0.2;
// shares are ceil(12 × cap / 1.8) = 6, 3, 3, 2. The moves end at 1, 2, 3
// ... s; balance holds once node 4 is down to 2 and no other is over.
func TestBalancedAtTheFirstMomentNoNodeIsOverItsShare(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	caps := map[string]float64{"1": 0.8, "2": 0.4, "3": 0.4, "4": 0.2}
	var js []api.Job
	dest := []string{"1", "2", "3", "1", "2", "3", "1", "1", "1", "1"} // 10 moves: 6, 3, 3 and 2 left
	for i := range 12 {
		j := api.Job{ID: "4." + string(rune('a'+i)), Node: "4", Started: t0, Ended: t0.Add(time.Minute)}
		if i < len(dest) {
			// Moves start at i s and take 500 ms: the job is there at i+0.5 s.
			j.Node = dest[i]
			j.MigrationLog = []api.Migration{{At: t0.Add(time.Duration(i) * time.Second), From: "4", To: dest[i], OK: true, TotalMS: 500}}
		}
		js = append(js, j)
	}
	at, ok := BalancedAt(js, caps)
	// After the 10th move (i = 9, at 9.5 s) node 4 has 2 and node 1 has 6.
	if want := t0.Add(9500 * time.Millisecond); !ok || !at.Equal(want) {
		t.Fatalf("balanced at %v (%v), want %v", at.Sub(t0), ok, want.Sub(t0))
	}
	// A failed move does not count: the job stayed.
	js[9].MigrationLog[0].OK, js[9].Node = false, "4"
	if _, ok := BalancedAt(js, caps); ok {
		t.Fatal("balanced, though three jobs stayed on node 4 until the end")
	}
	// Jobs that end leave: two of node 4's three end at 30 s, and of the
	// 10 left (5, 3, 3, 1) none is over its share (5, 3, 3, 2).
	js[10].Ended, js[11].Ended = t0.Add(30*time.Second), t0.Add(30*time.Second)
	if at, ok := BalancedAt(js, caps); !ok || !at.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("balanced at %v (%v), want at 30 s, when two of node 4's jobs ended", at.Sub(t0), ok)
	}
	// Jobs that start a millisecond apart on node 4 are not balanced at
	// the first start, when the one job there is within its share.
	for i := range js {
		js[i].Started = t0.Add(time.Duration(i) * time.Millisecond)
	}
	if at, ok := BalancedAt(js, caps); !ok || !at.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("staggered starts: balanced at %v (%v), want at 30 s", at.Sub(t0), ok)
	}
}

func TestBurnCPUReadsTheLastLine(t *testing.T) {
	if v, ok := burnCPU("burn: 1/5\nburn: done cpu=2.04 elapsed=7.10\n"); !ok || v != 2.04 {
		t.Fatalf("%v %v", v, ok)
	}
	for _, bad := range []string{"", "burn: 1/5\n", "burn: done cpu=", "burn: done cpu=x elapsed=1", "burn: done cpu=-1 elapsed=1"} {
		if v, ok := burnCPU(bad); ok {
			t.Fatalf("%q: read %v", bad, v)
		}
	}
}
