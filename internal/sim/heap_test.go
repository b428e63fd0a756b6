package sim

import (
	"cmp"
	"math/rand"
	"slices"
	"testing"
)

// Whichever holds an event, a lane or the heap, events come out in the
// one order on (at, seq): pushed as the simulator pushes them (mostly a
// kind's constant delay after now, some earlier or at random) and popped
// between pushes, they come out as a sort of all of them would.
func TestEventsComeOutInOrder(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	var q events
	var pushed, popped []event
	delay := map[kind]int64{evMsg: 200, evTick: 1000, evRound: 1000, evDone: -1, evLand: -1}
	kinds := []kind{evMsg, evMsg, evTick, evRound, evRound, evDone, evLand}
	now := int64(0)
	for i := 0; i < 20000; i++ {
		if q.len() > 0 && rng.Intn(3) == 0 {
			e := q.pop()
			if e.at < now {
				t.Fatalf("event at %d popped after %d", e.at, now)
			}
			now = e.at
			popped = append(popped, e)
			continue
		}
		k := kinds[rng.Intn(len(kinds))]
		e := event{kind: k, at: now + delay[k]}
		switch {
		case delay[k] < 0 || rng.Intn(10) == 0:
			e.at = now + rng.Int63n(3000)
		case k == evRound && rng.Intn(4) == 0:
			e.val = 1 // a kick's: now
			e.at = now
		}
		q.push(e)
		e.seq = q.seq
		pushed = append(pushed, e)
	}
	for q.len() > 0 {
		popped = append(popped, q.pop())
	}
	slices.SortFunc(pushed, func(a, b event) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.seq, b.seq)) })
	// Popped between pushes, an order can differ from the sort only if an
	// event were pushed due before now, which the simulator never does.
	if !slices.Equal(pushed, popped) {
		t.Fatal("events came out of order")
	}
}
