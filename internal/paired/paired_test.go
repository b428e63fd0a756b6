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
