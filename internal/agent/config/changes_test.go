package config

import (
	"slices"
	"testing"
	"time"
)

func TestChanges(t *testing.T) {
	a := Default()
	b := a
	if got := Changes(a, b); len(got) != 0 {
		t.Fatalf("the same config: %v", got)
	}
	b.Scheduler, b.PeerPort, b.Load.Interval, b.Limits.RunCount, b.Join = "balance", 9, time.Minute, 3, []string{"n2"}
	if got, want := Changes(a, b), []string{"peer_port", "join", "scheduler", "load.interval", "limits.run_count"}; !slices.Equal(got, want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
}
