// Package sched decides where processes go: placement at start now, and
// (later) the analyzers, managers and policies that migrate them.
//
// Everything here is pure: decisions are functions of the inputs given —
// node loads, configuration, a clock and a random source passed in — with no
// I/O, no goroutines and no clock of its own. The agent, the simulator and
// the tests call the same functions.
package sched

import (
	"errors"
	"sort"
	"strconv"
)

// NodeLoad is what placement knows of one node.
type NodeLoad struct {
	ID       string
	Capacity float64 // cores
	Load     float64 // runnable threads per unit of capacity
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
