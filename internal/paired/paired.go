// Package paired compares two treatments measured in pairs (one seed of
// a simulation, one round of a benchmark, under each): the mean of the
// pairs' differences and the geometric mean of their ratios, each with
// a 95 % Student t interval. Pairing takes out what the two runs of a
// pair share (the seed's draws, the machine's speed that round), so the
// interval is of the treatments' difference alone.
//
// It is pure: numbers in, numbers out; no I/O.
package paired

import (
	"fmt"
	"math"
)

// Interval is a mean and its 95 % confidence interval over N values.
// With fewer than two values Lo and Hi are NaN: no spread is known.
type Interval struct {
	N             int
	Mean, Lo, Hi  float64
	Std           float64 // the values' sample standard deviation
	HalfWidthFrac float64 // (Hi − Lo) / 2 / |Mean|, for reading noise
}

// Contains says whether v lies in the interval.
func (iv Interval) Contains(v float64) bool { return iv.Lo <= v && v <= iv.Hi }

// Format is "mean [lo, hi]" with prec decimals, or the mean alone
// when no interval is known.
func (iv Interval) Format(prec int) string {
	if iv.N < 2 {
		return fmt.Sprintf("%.*f", prec, iv.Mean)
	}
	return fmt.Sprintf("%.*f [%.*f, %.*f]", prec, iv.Mean, prec, iv.Lo, prec, iv.Hi)
}

// Mean is the mean of xs with its 95 % t interval.
func Mean(xs []float64) Interval {
	iv := Interval{N: len(xs), Lo: math.NaN(), Hi: math.NaN()}
	if len(xs) == 0 {
		iv.Mean = math.NaN()
		return iv
	}
	for _, x := range xs {
		iv.Mean += x
	}
	iv.Mean /= float64(len(xs))
	if len(xs) < 2 {
		return iv
	}
	ss := 0.0
	for _, x := range xs {
		ss += (x - iv.Mean) * (x - iv.Mean)
	}
	iv.Std = math.Sqrt(ss / float64(len(xs)-1))
	h := T975(len(xs)-1) * iv.Std / math.Sqrt(float64(len(xs)))
	iv.Lo, iv.Hi = iv.Mean-h, iv.Mean+h
	if iv.Mean != 0 {
		iv.HalfWidthFrac = h / math.Abs(iv.Mean)
	}
	return iv
}

// Diff is b − a, pair by pair, with its 95 % interval. a and b are in
// pair order; extra values of the longer are left out.
func Diff(a, b []float64) Interval {
	n := min(len(a), len(b))
	d := make([]float64, n)
	for i := range n {
		d[i] = b[i] - a[i]
	}
	return Mean(d)
}

// Ratio is the geometric mean of b / a over the pairs, with the 95 %
// interval of the mean of the log ratios taken back: a ratio's interval
// is then symmetric in the ratio's logarithm (1/2 and 2 alike away from
// 1). Pairs with a value that is not positive are left out.
func Ratio(a, b []float64) Interval {
	var ls []float64
	for i := range min(len(a), len(b)) {
		if a[i] > 0 && b[i] > 0 {
			ls = append(ls, math.Log(b[i]/a[i]))
		}
	}
	l := Mean(ls)
	iv := Interval{N: l.N, Mean: math.Exp(l.Mean), Lo: math.Exp(l.Lo), Hi: math.Exp(l.Hi), Std: l.Std}
	if l.N >= 2 {
		iv.HalfWidthFrac = (iv.Hi - iv.Lo) / 2 / iv.Mean
	}
	return iv
}

// t975 are Student's t distribution's 97.5 % quantiles for 1 to 30
// degrees of freedom (any table of the t distribution).
var t975 = [...]float64{12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
	2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
	2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042}

// T975 is the 97.5 % quantile of Student's t with df degrees of freedom,
// the half width of a 95 % interval in standard errors. Past 30 it is
// the table's value at the next lower tabulated df (40: 2.021, 60:
// 2.000, 120: 1.980), a little wide rather than narrow.
func T975(df int) float64 {
	switch {
	case df < 1:
		return math.NaN()
	case df <= len(t975):
		return t975[df-1]
	case df <= 40:
		return t975[len(t975)-1]
	case df <= 60:
		return 2.021
	case df <= 120:
		return 2.000
	}
	return 1.980
}
