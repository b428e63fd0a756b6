package sim

import (
	"math"
	"math/rand"
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
		// An M/M/1 mean converges slowly: the sample mean of 9·10⁶ jobs
		// has a standard deviation of about 0.7 % (its asymptotic
		// variance, ρ(2+5ρ-4ρ²+ρ³)/(1-ρ)⁴ = 3.6·10⁴, over the jobs); at
		// 3·10⁶ seeds fell 2.7 % off.
		{0.9, 10.0, "random", 10000, false},
		{0.9, 2.61, "random-two", 600, false},
		// λ = 0.99, best of two: a minute of wall time, for make
		// test-long. Random at 0.99 is an M/M/1 queue of mean 100 whose
		// length relaxes in about 1/(1-√λ)² = 40,000 service times: its
		// mean within 2 % at n = 1,000 would take some 4·10⁸ jobs, and the
		// 0.9 case checks the same queue.
		{0.99, 5.43, "random-two", 3000, true},
	}
	for _, k := range cases {
		if k.long && os.Getenv("ROAM_TEST_LONG") == "" {
			continue
		}
		c := DefaultConfig()
		c.Nodes, c.Duration, c.Seed, c.Oracle, c.Policy, c.Placement = 1000, time.Duration(k.secs)*time.Second, 7, true, "", k.placement
		c.Workload = &Poisson{Utilization: k.lambda, MeanLength: 1}
		c.Prefill = stationary(k.lambda, k.placement)
		got := supermarketMean(t, c, k.want)
		if math.Abs(got-k.want)/k.want > 0.02 {
			t.Errorf("λ %.2f %s: mean time in the system %.3f, want %.2f within 2 %%", k.lambda, k.placement, got, k.want)
		}
		t.Logf("λ %.2f %s: %.3f (closed form %.2f)", k.lambda, k.placement, got, k.want)
	}
}

// stationary draws a queue's length from the model's stationary law, so
// that the run starts where it would end up (at 0.99 it would take
// thousands of service times to get there): P(length >= i) is λ^i for
// a random server (M/M/1), λ^(2^i - 1) for the best of two
// (Mitzenmacher).
func stationary(lambda float64, placement string) func(*rand.Rand) int {
	return func(rng *rand.Rand) int {
		u, i := rng.Float64(), 0
		for {
			tail := math.Pow(lambda, float64(i+1))
			if placement == "random-two" {
				tail = math.Pow(lambda, math.Exp2(float64(i+1))-1)
			}
			if u >= tail {
				return i
			}
			i++
		}
	}
}

// supermarketMean runs c and returns the mean response of the processes
// submitted after the first tenth of the run (little warm-up is left
// after Prefill) and before its last tenth (a process still in the
// system at the end would go uncounted, and the mean low).
func supermarketMean(t *testing.T, c Config, want float64) float64 {
	t.Helper()
	s, err := New(c)
	if err != nil {
		t.Fatal(err)
	}
	s.warmup, s.cutoff = int64(c.Duration/10), int64(c.Duration-c.Duration/10)
	return s.Run().MeanResp
}
