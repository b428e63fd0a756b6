package connlimit

import "testing"

// The caps' decisions, one step at a time: a key past its cap is refused
// by the key, anyone past the total by the total, a key with a cap of
// its own only by that cap (and outside the total), "" by the total
// alone; a release gives a place back to the key and the total it held.
// A key whose own cap goes (a member that left) gives back the place it
// took where it took it.
func TestCounter(t *testing.T) {
	c := NewCounter(Caps{Total: 3, PerKey: 2})
	own := map[string]int{"0": 2} // root's, or a member's address
	places := map[string][]Place{}
	for i, s := range []struct {
		op, key     string
		ok, byTotal bool // for an admit
		total, of   int  // Open(key) after the step
	}{
		{"admit", "a", true, false, 1, 1},
		{"admit", "a", true, false, 2, 2},
		{"admit", "a", false, false, 2, 2}, // a's cap
		{"admit", "", true, false, 3, 0},   // "": the total alone
		{"admit", "b", false, true, 3, 0},  // the total
		{"admit", "0", true, false, 4, 1},  // its own cap, outside the total
		{"admit", "0", true, false, 5, 2},
		{"admit", "0", false, false, 5, 2}, // its own cap
		{"release", "a", false, false, 4, 1},
		{"admit", "b", true, false, 5, 1}, // a's place, taken by b
		{"release", "0", false, false, 4, 1},
		{"admit", "c", false, true, 4, 0}, // root's place is not the others'
		{"release", "", false, false, 3, 0},
		{"admit", "c", true, false, 4, 1},
		{"lose own", "0", false, false, 4, 1},
		{"admit", "0", false, true, 4, 1}, // now in the total, which is full
		{"release", "0", false, false, 3, 0},
		{"admit", "0", false, true, 3, 0}, // its place was outside the total
	} {
		if s.op == "lose own" {
			delete(own, s.key)
		} else if s.op == "admit" {
			p, ok, byTotal := c.Admit(s.key, own[s.key])
			if ok != s.ok || byTotal != s.byTotal {
				t.Fatalf("step %d: admit %q = %v, by the total %v; want %v, %v", i, s.key, ok, byTotal, s.ok, s.byTotal)
			}
			if ok {
				places[s.key] = append(places[s.key], p)
			}
		} else {
			c.Release(places[s.key][0])
			places[s.key] = places[s.key][1:]
		}
		if total, of := c.Open(s.key); total != s.total || of != s.of {
			t.Fatalf("step %d (%s %q): open %d, %d of the key; want %d, %d", i, s.op, s.key, total, of, s.total, s.of)
		}
	}
}
