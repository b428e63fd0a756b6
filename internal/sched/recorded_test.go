package sched

import (
	"math/rand"
	"slices"
	"testing"
)

// What a Tap gave, a Replay gives back: the same numbers from every
// method of rand.Rand a decision uses, and no more.
func TestTapReplays(t *testing.T) {
	draw := func(r *rand.Rand) []float64 {
		out := []float64{float64(r.Intn(7)), r.Float64(), float64(r.Int63n(1 << 40)), float64(r.Uint64() >> 11)}
		p := r.Perm(5)
		r.Shuffle(len(p), func(i, j int) { p[i], p[j] = p[j], p[i] })
		for _, x := range p {
			out = append(out, float64(x))
		}
		return out
	}
	tap := NewTap(42)
	want := draw(rand.New(tap))
	rep := &Replay{Draws: tap.Draws}
	if got := draw(rand.New(rep)); !slices.Equal(got, want) || rep.Next != len(tap.Draws) || rep.Over != 0 {
		t.Fatalf("replayed %v, tapped %v (%d of %d draws, %d over)", got, want, rep.Next, len(tap.Draws), rep.Over)
	}
	rep = &Replay{Draws: tap.Draws[:2]}
	draw(rand.New(rep))
	if rep.Over == 0 {
		t.Fatal("a replay past its draws did not count them")
	}
}
