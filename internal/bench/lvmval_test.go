package bench

import (
	"math"
	"strings"
	"testing"
)

// The simulator's errors against the agents, run by run: sim / agents −
// 1, the median of 10 with the 2nd and 9th as its interval, the median
// of their absolute values, and the 5 % line on the signed median.
func TestValErrors(t *testing.T) {
	agents := []float64{20, 20, 20, 20, 20, 20, 20, 20, 20, 20}
	// errors −10, −4, −2, −1, 0, +1, +2, +3, +6, +12 %, shuffled
	simv := []float64{20.4, 18, 20.6, 19.6, 20, 22.4, 19.8, 19.2, 21.2, 20.2}
	e := valErrors(simv, agents)
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	if e.Median.N != 10 || !near(e.Median.Median, 0.005) || !near(e.Median.Lo, -0.04) || !near(e.Median.Hi, 0.06) {
		t.Fatalf("median error %+v, want +0.5 %% [−4, +6]", e.Median)
	}
	if !near(e.Abs, 0.025) || !e.within() {
		t.Fatalf("|error| median %v (want 0.025), within 5 %%: %t", e.Abs, e.within())
	}
	if got := e.pct(); !strings.HasPrefix(got, "+0.5 % [-4.0, +6.0] (97.9 % coverage), |error| median 2.5 %") {
		t.Fatalf("pct = %q", got)
	}
	for i := range simv {
		simv[i] *= 1.1 // every run 10 % over: +10.5 % at the median
	}
	if e := valErrors(simv, agents); e.within() || !near(e.Median.Median, 1.1*1.005-1) {
		t.Fatalf("10 %% over: median %v, within %t; want 10.55 %% and not within", e.Median.Median, e.within())
	}
}
