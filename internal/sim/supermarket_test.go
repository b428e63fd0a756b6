package sim

import (
	"math"
	"os"
	"testing"
	"time"
)

// The supermarket model (Mitzenmacher): n servers of rate 1, Poisson
// arrivals of rate λn, exponential work; each job to a server drawn at
// random (M/M/1: mean time in the system 1/(1-λ)) or to the shorter of
// two drawn (sched.PickTwo and SecondOfTwo, the agent's random-two).
// Processor sharing and FIFO have the same queue lengths here, and so
// the same mean. n = 1,000, means within 2 % of the closed form.
func TestSupermarket(t *testing.T) {
	cases := []struct {
		lambda, want float64
		placement    string
		secs         int
		long         bool
	}{
		{0.9, 10.0, "random", 3000, false},
		{0.9, 2.61, "random-two", 600, false},
		// λ = 0.99 relaxes a hundred times slower than 0.9: minutes of
		// wall time, for make test-long.
		{0.99, 100, "random", 200000, true},
		{0.99, 5.43, "random-two", 20000, true},
	}
	for _, k := range cases {
		if k.long && os.Getenv("ROAM_TEST_LONG") == "" {
			continue
		}
		c := DefaultConfig()
		c.Nodes, c.Duration, c.Seed, c.Oracle, c.Policy, c.Placement = 1000, time.Duration(k.secs)*time.Second, 7, true, "", k.placement
		c.Workload = &Poisson{Utilization: k.lambda, MeanLength: 1}
		got := supermarketMean(t, c, k.want)
		if math.Abs(got-k.want)/k.want > 0.02 {
			t.Errorf("λ %.2f %s: mean time in the system %.3f, want %.2f within 2 %%", k.lambda, k.placement, got, k.want)
		}
		t.Logf("λ %.2f %s: %.3f (closed form %.2f)", k.lambda, k.placement, got, k.want)
	}
}

// supermarketMean runs c and returns the mean response of the processes
// submitted after the first tenth of the run, the warm-up.
func supermarketMean(t *testing.T, c Config, want float64) float64 {
	t.Helper()
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	s.warmup = int64(c.Duration / 10)
	return s.Run().MeanResp
}
