package agent

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/secret"
)

// A node's calls to itself (ps, policies, events, a job's record) run in
// process: they need no peer port, and errors keep their kind.
func TestSelfCallsNeedNoPeerPort(t *testing.T) {
	sf := filepath.Join(t.TempDir(), "secret")
	if err := secret.New().WriteFile(sf); err != nil {
		t.Fatal(err)
	}
	a, _ := startAgent(t, "a", sf)
	a.peerLn.Close()
	if ps := a.sched.Policies(); len(ps) != 1 || ps[0].Node != "a" {
		t.Errorf("policies: %+v", ps)
	}
	if jobs := a.PS(Caller{}, true); len(jobs) != 0 {
		t.Errorf("ps: %+v", jobs)
	}
	a.event(api.Event{Kind: "test"})
	// A zone east of UTC: its "+" must reach the route as a plus.
	since := time.Now().Add(-time.Hour).In(time.FixedZone("east", 3600))
	if evs := a.Events(Caller{}, since); len(evs) != 1 || evs[0].Kind != "test" {
		t.Errorf("events: %+v", evs)
	}
	if _, err := a.control.Record("a.1"); !errors.Is(err, peer.ErrNotFound) || err.Error() != "unknown job a.1" {
		t.Errorf("record of an unknown job: %v", err)
	}
	if _, err := a.control.Record("b.1"); !errors.Is(err, peer.ErrUnavailable) {
		t.Errorf("record of another node's job: %v", err)
	}
}
