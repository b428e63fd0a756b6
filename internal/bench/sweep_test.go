package bench

import (
	"math"
	"testing"
	"time"

	"roam/internal/api"
)

// The sweep is the same on every run, its lengths within their bounds
// and heavy-tailed as drawn: the truncated Pareto's mean, and most jobs
// short.
func TestSweepJobs(t *testing.T) {
	for _, size := range []sweepSize{sweepFull, sweepQuick} {
		a, b := sweepJobs(size), sweepJobs(size)
		if len(a) != size.jobs {
			t.Fatalf("%d jobs, want %d", len(a), size.jobs)
		}
		sum, short := 0.0, 0
		classes := map[int]int{}
		for i, j := range a {
			if j != b[i] {
				t.Fatalf("index %d is %+v, then %+v: not the same sweep", i, j, b[i])
			}
			if j.cpu < size.minCPU || j.cpu > size.maxCPU {
				t.Fatalf("index %d: %g CPU-s, outside %g..%g", i, j.cpu, size.minCPU, size.maxCPU)
			}
			sum += j.cpu
			if j.cpu <= 2*size.minCPU {
				short++
			}
			classes[j.mib]++
		}
		// E[X] of the Pareto of shape α truncated to [L, H].
		l, h, al := size.minCPU, size.maxCPU, sweepAlpha
		want := al * math.Pow(l, al) / (1 - math.Pow(l/h, al)) * (math.Pow(h, 1-al) - math.Pow(l, 1-al)) / (1 - al)
		mean := sum / float64(len(a))
		t.Logf("%d jobs: %.1f CPU-s in all, mean %.3f (the distribution's %.3f), %d of at most %g CPU-s, classes %v", len(a), sum, mean, want, short, 2*size.minCPU, classes)
		if math.Abs(mean-want) > 0.25*want {
			t.Errorf("mean length %.3f, the distribution's %.3f", mean, want)
		}
		// P(X ≤ 2L) = (1 − 2^-α) / (1 − (L/H)^α): over half.
		if float64(short) < 0.45*float64(len(a)) {
			t.Errorf("%d of %d jobs of at most %g CPU-s: not heavy-tailed", short, len(a), 2*size.minCPU)
		}
		for _, c := range sweepClasses {
			if classes[c] < len(a)/5 {
				t.Errorf("class %d MiB: %d jobs of %d", c, classes[c], len(a))
			}
		}
	}
}

// The most jobs running at once counts an end and a start at the same
// instant as the room passed on.
func TestMostRunning(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	recs := []api.Job{
		{Started: at(0), Ended: at(2)},
		{Started: at(0), Ended: at(1)},
		{Started: at(1), Ended: at(3)},
		{Started: at(2.5), Ended: at(4)},
	}
	if n := mostRunning(recs); n != 2 {
		t.Fatalf("most running %d, want 2", n)
	}
}
