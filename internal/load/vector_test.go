package load

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// The vector keeps its entries in a ring; seen from outside (Entries,
// All, At, Get) they are a list, oldest first, that a refresh changes in
// place, a new node joins at the end of, a full fifo vector drops its
// first from, and Forget removes one from: the model here. A vector
// held in a caller's array (NewVectorIn) is the same list, and its
// entries are in that array, none past its size.
func TestVectorRingIsAList(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		size := rapid.IntRange(1, 6).Draw(t, "size")
		pol := rapid.SampledFrom(Policies).Draw(t, "policy")
		v := NewVector(size, pol)
		var buf []Entry
		if rapid.Bool().Draw(t, "in") {
			buf = make([]Entry, size+1)
			buf[size].Node = "past"
			v = NewVectorIn(size, pol, buf)
		}
		var model []Entry
		for i, n := 0, rapid.IntRange(0, 60).Draw(t, "n"); i < n; i++ {
			e := Entry{Node: fmt.Sprint(rapid.IntRange(0, 9).Draw(t, "node")), Load: float64(i)}
			at := slices.IndexFunc(model, func(x Entry) bool { return x.Node == e.Node })
			if rapid.IntRange(0, 5).Draw(t, "op") == 0 {
				v.Forget(e.Node)
				if at >= 0 {
					model = slices.Delete(model, at, at+1)
				}
			} else {
				local := rapid.Float64Range(0, 60).Draw(t, "local")
				kept := v.Update(e, local)
				switch {
				case at >= 0:
					model[at] = e
				case len(model) < size:
					model = append(model, e)
				case pol == PolicyFIFO || e.Load < local:
					model = append(model[1:], e)
				default:
					if kept {
						t.Fatalf("kept %v, which beneficial drops at local load %v", e, local)
					}
				}
			}
			if got := v.Entries(); !slices.Equal(got, model) {
				t.Fatalf("entries %v, want %v", got, model)
			}
			if buf != nil && buf[size].Node != "past" {
				t.Fatalf("an entry was written past the vector's size: %v", buf)
			}
			for _, m := range model {
				if buf != nil && !slices.Contains(buf[:size], m) {
					t.Fatalf("entry %v is not in the vector's array %v", m, buf)
				}
			}
			if got := slices.Collect(v.All()); !slices.Equal(got, model) || v.Len() != len(model) {
				t.Fatalf("All %v, want %v", got, model)
			}
			for k, m := range model {
				if g, ok := v.Get(m.Node); v.At(k) != m || !ok || g != m {
					t.Fatalf("At(%d) %v, Get %v, want %v", k, v.At(k), g, m)
				}
			}
		}
	})
}
