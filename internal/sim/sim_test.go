package sim

import (
	"reflect"
	"testing"
	"time"
)

// A run is a function of its Config: two runs with one seed give the
// same results, and another seed others.
func TestSameSeedSameResults(t *testing.T) {
	c := DefaultConfig()
	c.Nodes, c.Duration, c.Failures = 300, 40*time.Second, 3
	c.Workload = &Poisson{Utilization: 0.8, MeanLength: 10, Shape: 1.5}
	a, b := run(t, c), run(t, c)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("two runs of seed %d differ:\n%+v\n%+v", c.Seed, a, b)
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
