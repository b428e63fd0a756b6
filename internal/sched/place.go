// Package sched decides where processes go: placement at start; the
// policies' analyzers and managers that migrate them (decide.go,
// policy.go); and the round's ledger of admissions, heard loads, recent
// moves, failures and pacing that a node keeps between rounds (ledger.go).
//
// Everything here is pure: decisions are functions of the inputs given —
// node loads, configuration, a clock and a random source passed in — with no
// I/O, no goroutines and no clock of its own. The agent, the simulator and
// the tests call the same functions.
package sched

import (
	"errors"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strconv"
)

// NodeLoad is what placement knows of one node.
type NodeLoad struct {
	ID       string
	Capacity float64 // cores
	Load     float64 // runnable threads per unit of capacity
	// Unknown: no load heard from the node yet (it is not in the load
	// vector). Its Load means nothing: the load-based placements take it
	// to be as loaded as the mean of the nodes they know, not idle (past
	// the vector's size most nodes are unknown, and an idle guess would
	// send them everything); round-robin looks at no load.
	Unknown bool
	// Draining: roam node drain; nothing is placed there.
	Draining bool
}

// ErrNoNode means there is no node to place on.
var ErrNoNode = errors.New("no alive node to place on")

// PlaceLeastLoaded places n new processes one by one, each on the node
// with the least load per unit of capacity, counting the processes it has
// already placed (each adds 1/capacity to its node's load). Ties go to the
// node with the larger capacity, then the lower id, so the result is
// deterministic.
func PlaceLeastLoaded(nodes []NodeLoad, n int) ([]string, error) {
	if len(nodes) == 0 {
		return nil, ErrNoNode
	}
	ns := make([]NodeLoad, 0, len(nodes))
	for _, x := range nodes {
		if x.Capacity > 0 {
			ns = append(ns, x)
		}
	}
	if len(ns) == 0 {
		return nil, ErrNoNode
	}
	sort.Slice(ns, func(i, j int) bool { return IDLess(ns[i].ID, ns[j].ID) })
	out := make([]string, 0, n)
	for k := 0; k < n; k++ {
		best := 0
		for i := 1; i < len(ns); i++ {
			a, b := ns[i], ns[best]
			// What the node's load would be with one more process.
			la, lb := a.Load+1/a.Capacity, b.Load+1/b.Capacity
			if la < lb-1e-9 || (la < lb+1e-9 && a.Capacity > b.Capacity) {
				best = i
			}
		}
		out = append(out, ns[best].ID)
		ns[best].Load += 1 / ns[best].Capacity
	}
	return out, nil
}

// IDLess orders node ids naturally: "2" before "10".
func IDLess(a, b string) bool {
	ai, errA := strconv.Atoi(a)
	bi, errB := strconv.Atoi(b)
	if errA == nil && errB == nil {
		return ai < bi
	}
	return a < b
}

// Place places n new processes by the named placement: least-loaded,
// random-two (the power of two choices: sample two nodes, take the less
// loaded), or round-robin from rr (a counter the caller keeps; it gets
// the next value back). Draining nodes are left out.
func Place(kind string, nodes []NodeLoad, n int, rng *rand.Rand, rr int) ([]string, int, error) {
	nodes = slices.DeleteFunc(slices.Clone(nodes), func(l NodeLoad) bool { return l.Draining })
	if kind != "round-robin" {
		nodes = guessUnknown(nodes)
	}
	switch kind {
	case "", "least-loaded":
		out, err := PlaceLeastLoaded(nodes, n)
		return out, rr, err
	case "random-two":
		out, err := PlaceRandomTwo(nodes, n, rng)
		return out, rr, err
	case "round-robin":
		return PlaceRoundRobin(nodes, n, rr)
	}
	return nil, rr, fmt.Errorf("placement %q is not one of least-loaded, random-two, round-robin", kind)
}

// guessUnknown returns nodes with each unknown load set to the mean of the
// known ones (a copy; with none known, the unknown are left out).
func guessUnknown(nodes []NodeLoad) []NodeLoad {
	sum, n := 0.0, 0
	for _, x := range nodes {
		if !x.Unknown {
			sum += x.Load
			n++
		}
	}
	out := make([]NodeLoad, 0, len(nodes))
	for _, x := range nodes {
		if x.Unknown {
			if n == 0 {
				continue
			}
			x.Load = sum / float64(n)
		}
		out = append(out, x)
	}
	return out
}

// usable are the nodes with capacity, in id order.
func usable(nodes []NodeLoad) []NodeLoad {
	var ns []NodeLoad
	for _, x := range nodes {
		if x.Capacity > 0 {
			ns = append(ns, x)
		}
	}
	sort.Slice(ns, func(i, j int) bool { return IDLess(ns[i].ID, ns[j].ID) })
	return ns
}

// PlaceRandomTwo places each process on the less loaded (after taking it)
// of two nodes drawn at random, counting what it placed already.
func PlaceRandomTwo(nodes []NodeLoad, n int, rng *rand.Rand) ([]string, error) {
	ns := usable(nodes)
	if len(ns) == 0 {
		return nil, ErrNoNode
	}
	out := make([]string, 0, n)
	for k := 0; k < n; k++ {
		a, b := rng.Intn(len(ns)), rng.Intn(len(ns))
		if len(ns) > 1 {
			for b == a {
				b = rng.Intn(len(ns))
			}
		}
		if ns[b].Load+1/ns[b].Capacity < ns[a].Load+1/ns[a].Capacity {
			a = b
		}
		out = append(out, ns[a].ID)
		ns[a].Load += 1 / ns[a].Capacity
	}
	return out, nil
}

// PlaceRoundRobin places the processes on the nodes in id order, going on
// from where the last placement stopped (rr), whatever their load: the
// static baseline.
func PlaceRoundRobin(nodes []NodeLoad, n int, rr int) ([]string, int, error) {
	ns := usable(nodes)
	if len(ns) == 0 {
		return nil, rr, ErrNoNode
	}
	out := make([]string, 0, n)
	for k := 0; k < n; k++ {
		out = append(out, ns[(rr+k)%len(ns)].ID)
	}
	return out, (rr + n) % len(ns), nil
}
