package sim

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// A run is a function of its Config: two runs with one seed give the
// same results (the second run in steps, RunTo), and another seed
// others. And the same results as before:
// a change made for speed (the event queue, the order of memory reads,
// an event that carries two messages) must leave them as they were, bit
// for bit. A change to the model or the decisions changes them on
// purpose: ROAM_UPDATE_DOCS=1 go test ./internal/sim -run
// TestSameSeedSameResults writes testdata/results-seed1.json again, and
// the diff goes in the commit.
func TestSameSeedSameResults(t *testing.T) {
	c := DefaultConfig()
	c.Nodes, c.Duration, c.Failures = 300, 40*time.Second, 3
	c.Workload = &Poisson{Utilization: 0.8, MeanLength: 10, Shape: 1.5}
	a := run(t, c)
	stepped, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, to := range []time.Duration{0, 7 * time.Second, 7 * time.Second, 25 * time.Second} {
		if stepped.RunTo(to); stepped.Now() != to {
			t.Fatalf("RunTo(%v) stopped at %v", to, stepped.Now())
		}
	}
	b := stepped.Run()
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs of seed %d differ:\n%+v\n%+v", c.Seed, a, b)
	}
	path := filepath.Join("testdata", "results-seed1.json")
	if os.Getenv("ROAM_UPDATE_DOCS") != "" {
		if err := os.WriteFile(path, a.JSON(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if want, err := os.ReadFile(path); err != nil || !bytes.Equal(a.JSON(), want) {
		t.Errorf("the results of seed %d changed (%v):\n%s", c.Seed, err, a.JSON())
	}
	if a.Done == 0 || a.Migrations == 0 || a.GossipAge == 0 || a.Failed != 3 {
		t.Fatalf("a run that measured nothing: %+v", a)
	}
	c.Seed++
	if d := run(t, c); reflect.DeepEqual(a, d) {
		t.Fatalf("seeds %d and %d gave the same results", c.Seed-1, c.Seed)
	}
	t.Logf("%+v", a)
}

func run(t *testing.T, c Config) Results {
	t.Helper()
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	return s.Run()
}

// A node that dies loses its processes, and once membership has
// declared it dead no load is sent to it and no process placed on it.
func TestFailureIsDetected(t *testing.T) {
	c := DefaultConfig()
	c.Nodes, c.Duration, c.Failures, c.DetectAfter = 40, 30*time.Second, 1, 2*time.Second
	c.Workload = &Poisson{Utilization: 0.9, MeanLength: 20, Shape: 1.5}
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	s.start()
	dead, detected := int32(-1), int64(0)
	for s.q.len() > 0 {
		e := s.q.pop()
		if e.at > int64(c.Duration) {
			break
		}
		s.now = e.at
		switch {
		case e.kind == evFail:
			dead = e.node
		case e.kind == evDetect:
			detected = s.now
		case detected > 0 && (e.node == dead || e.kind == evMsg && e.to2 == dead) && (e.kind == evMsg || e.kind == evStart) && s.now > detected+int64(c.Latency):
			t.Fatalf("at %v, kind %d sent to node %d, declared dead at %v", time.Duration(s.now), e.kind, dead, time.Duration(detected))
		}
		s.dispatch(e)
	}
	if detected == 0 || detected-int64(c.DetectAfter) < 0 {
		t.Fatalf("node %d's failure was not detected (at %v)", dead, time.Duration(detected))
	}
	if r := s.results(); r.Lost == 0 || r.Failed != 1 {
		t.Errorf("a node at 90 %% died and lost no process: %+v", r)
	}
	for pos := range s.others() {
		if s.nth(0, pos) == dead && dead != 0 {
			t.Errorf("node %d is still among node 0's targets", dead)
		}
	}
}
