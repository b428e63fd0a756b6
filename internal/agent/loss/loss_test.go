package loss

import (
	"testing"
	"time"
)

// Dead's verdicts: membership decides, unless the node has pushed to
// the home since it was declared dead and lately.
func TestDead(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	for _, c := range []struct {
		name string
		n    News
		now  time.Time
		want bool
	}{
		{"alive", News{Listed: true, Alive: true, Since: at(0)}, at(time.Minute), false},
		{"dead, never heard", News{Listed: true, Since: at(10 * time.Second)}, at(time.Minute), true},
		{"dead, heard before it was declared", News{Listed: true, Since: at(10 * time.Second), Heard: at(9 * time.Second)}, at(11 * time.Second), true},
		{"dead, heard since", News{Listed: true, Since: at(10 * time.Second), Heard: at(12 * time.Second)}, at(20 * time.Second), false},
		{"dead, heard since but not lately", News{Listed: true, Since: at(10 * time.Second), Heard: at(12 * time.Second)}, at(12*time.Second + Grace), true},
		{"unlisted, early", News{}, at(Grace), false},
		{"unlisted, late", News{}, at(Grace + time.Second), true},
		{"unlisted, late, pushing", News{Heard: at(Grace)}, at(Grace + time.Second), false},
	} {
		if got := Dead(c.n, start, c.now); got != c.want {
			t.Errorf("%s: Dead = %v, want %v", c.name, got, c.want)
		}
	}
}

// RetryAfter's waits double from RetryFirst to RetryMost, and it gives up
// RetryFor after the first try, not before.
func TestRetryAfter(t *testing.T) {
	began := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var waits []time.Duration
	for tries := 1; tries <= 8; tries++ {
		w, ok := RetryAfter(tries, began, began.Add(time.Minute))
		if !ok {
			t.Fatalf("gave up after %d tries, a minute in", tries)
		}
		waits = append(waits, w)
	}
	want := []time.Duration{1, 2, 4, 8, 16, 30, 30, 30}
	for i := range want {
		if waits[i] != want[i]*time.Second {
			t.Fatalf("waits %v, want %v seconds", waits, want)
		}
	}
	if _, ok := RetryAfter(1000, began, began.Add(RetryFor-time.Second)); !ok {
		t.Fatal("gave up before RetryFor")
	}
	if _, ok := RetryAfter(2, began, began.Add(RetryFor)); ok {
		t.Fatal("tries on past RetryFor")
	}
}
