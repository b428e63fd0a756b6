package connlimit

import "testing"

// The caps' decisions, one step at a time: a key past its cap is refused
// by the key, anyone past the total by the total, a key with a cap of
// its own only by that cap (and outside the total), "" by the total
// alone; a release gives a place back to the key and the total it held.
// A key at its cap with a connection not yet proven is admitted one
// over (its caller then closes the oldest such). A key whose own cap
// goes (a member that left) gives back the place it took where it took
// it.
func TestCounter(t *testing.T) {
	c := NewCounter(Caps{Total: 3, PerKey: 2, MakeRoom: true})
	own := map[string]int{"0": 2} // root's, or a member's address
	places := map[string][]*Place{}
	for i, s := range []struct {
		op, key   string
		v         Verdict // for an admit
		total, of int     // Open(key) after the step
	}{
		{"admit", "a", Admitted, 1, 1},
		{"admit", "a", Admitted, 2, 2},
		{"prove", "a", 0, 2, 2},
		{"prove", "a", 0, 2, 2},
		{"admit", "a", RefusedByKey, 2, 2}, // a's cap, both proven
		{"admit", "", Admitted, 3, 0},      // "": the total alone
		{"admit", "b", RefusedByTotal, 3, 0},
		{"admit", "0", Admitted, 4, 1}, // its own cap, outside the total
		{"admit", "0", Admitted, 5, 2},
		{"admit", "0", AdmittedOverOne, 6, 3}, // its own cap, but neither proven
		{"release", "0", 0, 5, 2},             // the caller closes the oldest
		{"prove", "0", 0, 5, 2},
		{"prove", "0", 0, 5, 2},
		{"admit", "0", RefusedByKey, 5, 2},
		{"release", "a", 0, 4, 1},
		{"admit", "b", Admitted, 5, 1}, // a's place, taken by b
		{"release", "0", 0, 4, 1},
		{"admit", "c", RefusedByTotal, 4, 0}, // root's place is not the others'
		{"release", "", 0, 3, 0},
		{"admit", "c", Admitted, 4, 1},
		{"lose own", "0", 0, 4, 1},
		{"admit", "0", RefusedByTotal, 4, 1}, // now in the total, which is full
		{"release", "0", 0, 3, 0},
		{"admit", "0", RefusedByTotal, 3, 0}, // its place was outside the total
	} {
		switch s.op {
		case "lose own":
			delete(own, s.key)
		case "admit":
			p, v := c.Admit(s.key, own[s.key])
			if v != s.v || (p != nil) != (v == Admitted || v == AdmittedOverOne) {
				t.Fatalf("step %d: admit %q = %v (place %v); want %v", i, s.key, v, p != nil, s.v)
			}
			if p != nil {
				places[s.key] = append(places[s.key], p)
			}
		case "prove":
			for _, p := range places[s.key] {
				if !p.proven {
					c.Prove(p)
					break
				}
			}
		case "release":
			c.Release(places[s.key][0])
			places[s.key] = places[s.key][1:]
		}
		if total, of := c.Open(s.key); total != s.total || of != s.of {
			t.Fatalf("step %d (%s %q): open %d, %d of the key; want %d, %d", i, s.op, s.key, total, of, s.total, s.of)
		}
	}
}
