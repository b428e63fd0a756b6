package limits

import (
	"testing"
	"time"
)

// A user's requests are bounded per second with bursts of four seconds'
// worth; root's are not; a second user has a bucket of their own.
func TestUserRates(t *testing.T) {
	r := NewRates(10)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	n := 0
	for r.Allow(1001, now) {
		n++
		if n > 1000 {
			break
		}
	}
	if n != 40 {
		t.Fatalf("burst of %d, want 40", n)
	}
	if !r.Allow(1002, now) || !r.Allow(0, now) {
		t.Fatal("another user or root refused")
	}
	if !r.Allow(1001, now.Add(150*time.Millisecond)) {
		t.Fatal("no token after 150 ms at 10 a second")
	}
	// An idle user's bucket is dropped.
	r.Allow(1003, now.Add(time.Hour))
	if len(r.users) != 1 {
		t.Fatalf("%d buckets kept", len(r.users))
	}
}
