package keeper

import (
	"strings"
	"testing"
	"time"
)

func TestCheckpointDue(t *testing.T) {
	t0 := time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name          string
		every         time.Duration
		last, arrived time.Time
		now           time.Time
		due           bool
		late          time.Duration
	}{
		{"none asked", 0, time.Time{}, t0, t0.Add(time.Hour), false, 0},
		{"not yet after arriving", 10 * time.Second, time.Time{}, t0, t0.Add(9 * time.Second), false, 0},
		{"due after arriving", 10 * time.Second, time.Time{}, t0, t0.Add(12 * time.Second), true, 2 * time.Second},
		{"from the last one", 10 * time.Second, t0.Add(5 * time.Second), t0, t0.Add(14 * time.Second), false, 0},
		{"late from the last one", 10 * time.Second, t0.Add(5 * time.Second), t0, t0.Add(20 * time.Second), true, 5 * time.Second},
		// A job that came here after its last checkpoint elsewhere counts
		// from its arrival: the one it left with is as new.
		{"arrived after the last", 10 * time.Second, t0, t0.Add(8 * time.Second), t0.Add(12 * time.Second), false, 0},
	} {
		late, due := Due(tc.every, tc.last, tc.arrived, tc.now)
		if due != tc.due || (due && late != tc.late) {
			t.Errorf("%s: due %v late %v, want %v %v", tc.name, due, late, tc.due, tc.late)
		}
	}
}

func TestCheckpointStore(t *testing.T) {
	live := []string{"n1", "n2", "n3", "n4"}
	for _, running := range []string{"n1", "n2", "n3"} {
		if got := StoreFor("n1.5", running, "n1", live); got != "n1" {
			t.Errorf("a job on %s: kept on %q, want its home n1", running, got)
		}
	}
	if got := StoreFor("n1.1", "n1", "n1", []string{"n1"}); got != "n1" {
		t.Errorf("alone: kept on %q, want its home", got)
	}
	// Its home not live: none, not a node the job may move to.
	if got := StoreFor("n1.5", "n2", "n1", []string{"n2", "n3"}); got != "" {
		t.Errorf("home dead: kept on %q, want none", got)
	}
}

// Due checkpoints go by users in turn: one user's many jobs, due first,
// do not hold another user's back until their last is taken.
func TestCheckpointOrder(t *testing.T) {
	s := time.Second
	ds := []DueJob{
		{"a1", 1, 9 * s}, {"a2", 1, 9 * s}, {"a3", 1, 8 * s}, {"a4", 1, 7 * s},
		{"b1", 2, 1 * s}, {"b2", 2, 2 * s}, {"c1", 3, 0},
	}
	got := strings.Join(Order(ds), " ")
	if want := "a1 b2 c1 a2 b1 a3 a4"; got != want {
		t.Errorf("order %s, want %s", got, want)
	}
	if got := Order(nil); len(got) != 0 {
		t.Errorf("none due: %v", got)
	}
}
