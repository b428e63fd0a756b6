package paired

import (
	"fmt"
	"math"
	"slices"
)

// MedianInterval is the median of N values with a distribution-free
// confidence interval for it: two order statistics, whose coverage
// (Level) follows from the binomial distribution alone, whatever the
// values' distribution (the sign-test interval). With too few values
// for 95 % (under 6) Lo and Hi are NaN.
type MedianInterval struct {
	N              int
	Median, Lo, Hi float64
	Level          float64 // the interval's exact coverage, ≥ 0.95
}

// Format is "median [lo, hi]" with prec decimals, or the median alone.
func (m MedianInterval) Format(prec int) string {
	if math.IsNaN(m.Lo) {
		return fmt.Sprintf("%.*f", prec, m.Median)
	}
	return fmt.Sprintf("%.*f [%.*f, %.*f]", prec, m.Median, prec, m.Lo, prec, m.Hi)
}

// Median is xs's median with its interval: [x(k), x(n+1−k)] of the
// sorted values, k the largest with P(B ≤ k−1) ≤ 2.5 % for B binomial
// (n, ½), so at least 95 % of samples put the true median inside
// (10 values: the 2nd and the 9th, 97.9 %).
func Median(xs []float64) MedianInterval {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	m := MedianInterval{N: n, Median: math.NaN(), Lo: math.NaN(), Hi: math.NaN()}
	if n == 0 {
		return m
	}
	m.Median = (s[(n-1)/2] + s[n/2]) / 2
	k, tail := 0, 0.0 // tail: P(B ≤ k−1)
	for {
		next := tail + binom(n, k)
		if next > 0.025 {
			break
		}
		k, tail = k+1, next
	}
	if k >= 1 {
		m.Lo, m.Hi, m.Level = s[k-1], s[n-k], 1-2*tail
	}
	return m
}

// binom is P(B = k) for B binomial (n, ½).
func binom(n, k int) float64 {
	lg := func(x int) float64 { v, _ := math.Lgamma(float64(x + 1)); return v }
	return math.Exp(lg(n) - lg(k) - lg(n-k) - float64(n)*math.Ln2)
}

// RelErrors are a[i] / b[i] − 1, pair by pair: the model's error against
// the measure, where a is the model's and b the measured value; pairs
// with b not positive are left out.
func RelErrors(a, b []float64) []float64 {
	var out []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			out = append(out, a[i]/b[i]-1)
		}
	}
	return out
}
