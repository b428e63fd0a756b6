package paired

import (
	"math"
	"testing"
)

// The interval of a textbook sample: 10 paired differences, mean 1,
// sample standard deviation 1, so the half width is t(9) / sqrt(10).
func TestDiffInterval(t *testing.T) {
	a := []float64{5, 5, 5, 5, 5, 5, 5, 5, 5, 5}
	b := make([]float64, len(a))
	d := []float64{1, 2, 0, 1, 2, 0, 1, 2, 0, 1}
	for i := range a {
		b[i] = a[i] + d[i]
	}
	iv := Diff(a, b)
	std := math.Sqrt(6.0 / 9) // Σ(d−1)² = 6
	h := 2.262 * std / math.Sqrt(10)
	if iv.N != 10 || math.Abs(iv.Mean-1) > 1e-12 || math.Abs(iv.Lo-(1-h)) > 1e-12 || math.Abs(iv.Hi-(1+h)) > 1e-12 {
		t.Fatalf("Diff = %+v, want mean 1 ± %.4f", iv, h)
	}
	if !iv.Contains(1) || iv.Contains(0) {
		t.Fatalf("%+v: contains 1 and not 0, want", iv)
	}
}

// A ratio's interval is the log ratios' taken back: b = 2a in every pair
// gives exactly 2, and one value left out when it is not positive.
func TestRatio(t *testing.T) {
	iv := Ratio([]float64{1, 2, 3, 0}, []float64{2, 4, 6, 5})
	if iv.N != 3 || math.Abs(iv.Mean-2) > 1e-12 || math.Abs(iv.Lo-2) > 1e-12 || math.Abs(iv.Hi-2) > 1e-12 {
		t.Fatalf("Ratio = %+v, want 2 [2, 2] over 3 pairs", iv)
	}
	iv = Ratio([]float64{1, 1, 1}, []float64{0.5, 1, 2})
	if math.Abs(iv.Mean-1) > 1e-12 || math.Abs(iv.Lo*iv.Hi-1) > 1e-9 {
		t.Fatalf("Ratio of 1/2, 1, 2 = %+v: want 1 and bounds symmetric in the log", iv)
	}
}

func TestOneValueHasNoInterval(t *testing.T) {
	iv := Mean([]float64{3})
	if iv.Mean != 3 || !math.IsNaN(iv.Lo) || iv.Format(1) != "3.0" {
		t.Fatalf("Mean of one value = %+v (%s)", iv, iv.Format(1))
	}
	if T975(1) != 12.706 || T975(35) != 2.042 || T975(1000) != 1.980 || !math.IsNaN(T975(0)) {
		t.Fatal("T975's table")
	}
}

// The median's interval is two order statistics fixed by the binomial
// (n, ½) alone: with 10 values the 2nd and the 9th (coverage 1 −
// 2·11/1024); with 5 none reaches 95 %.
func TestMedianInterval(t *testing.T) {
	xs := []float64{9, 1, 8, 2, 7, 3, 6, 4, 5, 10}
	m := Median(xs)
	if m.N != 10 || m.Median != 5.5 || m.Lo != 2 || m.Hi != 9 || math.Abs(m.Level-(1-22.0/1024)) > 1e-12 {
		t.Fatalf("Median = %+v, want 5.5 [2, 9] at %.4f", m, 1-22.0/1024)
	}
	if got := m.Format(1); got != "5.5 [2.0, 9.0]" {
		t.Fatalf("Format = %q", got)
	}
	// 20 values: P(B ≤ 5) = 0.0207, P(B ≤ 6) = 0.0577: the 6th and 15th.
	var ys []float64
	for i := range 20 {
		ys = append(ys, float64(i+1))
	}
	if m := Median(ys); m.Lo != 6 || m.Hi != 15 || m.Median != 10.5 {
		t.Fatalf("20 values: %+v, want 10.5 [6, 15]", m)
	}
	if m := Median(xs[:5]); !math.IsNaN(m.Lo) || m.Median != 7 {
		t.Fatalf("5 values: %+v, want 7 and no interval", m)
	}
	e := RelErrors([]float64{11, 9, 5}, []float64{10, 10, 0})
	if len(e) != 2 || math.Abs(e[0]-0.1) > 1e-12 || math.Abs(e[1]+0.1) > 1e-12 {
		t.Fatalf("RelErrors = %v, want [0.1 -0.1]", e)
	}
}
