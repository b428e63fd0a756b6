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

	"roam/internal/cpufeat"
	"roam/internal/resources"
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
	// Self: the node that places, the job's home. Least-loaded gives it a
	// process that every candidate would take alike (a tie): a home that
	// knows only equal loads (every node running one job, or a fresh
	// cluster, the members it has no entry of guessed at the same mean)
	// keeps its job, where the lowest id had every such home send its
	// job to one node (in roam sim, a fifth fewer processes done at 200
	// to 1,000 nodes).
	Self bool
	// MemJobsMB is the memory the node gives its jobs' requests, and
	// MemHeldMB what the requests of the jobs it holds or has agreed to
	// take add up to (load.Entry's); 0 MemJobsMB: not known, and not
	// counted (the node itself refuses a job it has no room for).
	MemJobsMB float64
	MemHeldMB float64
	// CPU is what its CPU offers (cpufeat; zero: it does not say): an
	// image goes there only when it has as much (RunsImage). A first
	// start goes anywhere: its program picks its code where it starts.
	CPU cpufeat.Set
}

// ErrNoCPU means no node's CPU can run a job's image.
var ErrNoCPU = errors.New("no alive node's CPU can run the job's image")

// RunsImage is the nodes whose CPU can run an image of a program that
// started on a CPU offering image (cpufeat.Fits), for a restart's or a
// move's choice; ErrNoCPU, naming what the first node left out lacks,
// when nodes had some and none is left. An image of unknown features,
// and a node that does not say, fit (cpufeat).
func RunsImage(nodes []NodeLoad, image cpufeat.Set) ([]NodeLoad, error) {
	var out []NodeLoad
	var why error
	for _, n := range nodes {
		err := cpufeat.Check(image, n.CPU, n.ID)
		if err == nil {
			out = append(out, n)
		} else if why == nil {
			why = err
		}
	}
	if len(out) == 0 && why != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoCPU, why)
	}
	return out, nil
}

// ErrNoNode means there is no node to place on.
var ErrNoNode = errors.New("no alive node to place on")

// PlaceLeastLoaded places n new processes of request req one by one, each
// on the node with the least load per unit of capacity among those with
// room for its memory, counting the processes it has already placed (each
// adds its slots, req.Slots()/capacity, to its node's load and its
// memory to the node's held). Ties go to the node with the larger
// capacity, then the lower id, so the result is deterministic. A process
// that fits nowhere fails the placement (FitsNowhere says why).
func PlaceLeastLoaded(nodes []NodeLoad, n int, req resources.Request) ([]string, error) {
	ns := usable(nodes)
	if len(ns) == 0 {
		return nil, ErrNoNode
	}
	slots := float64(req.Slots())
	out := make([]string, 0, n)
	for k := 0; k < n; k++ {
		best := -1
		for i, a := range ns {
			if !hasRoom(a, req) {
				continue
			}
			if best < 0 {
				best = i
				continue
			}
			b := ns[best]
			// What the node's load would be with the process; on a tie,
			// the larger node, then the home.
			la, lb := a.Load+slots/a.Capacity, b.Load+slots/b.Capacity
			if la < lb-1e-9 || la < lb+1e-9 && (a.Capacity > b.Capacity || a.Capacity == b.Capacity && a.Self && !b.Self) {
				best = i
			}
		}
		if best < 0 {
			return nil, noRoom(ns, req, n-k, n)
		}
		out = append(out, ns[best].ID)
		ns[best].take(req)
	}
	return out, nil
}

// take counts a process of request req placed on x.
func (x *NodeLoad) take(req resources.Request) {
	x.Load += float64(req.Slots()) / x.Capacity
	x.MemHeldMB += req.MemMB()
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

// Place places n new processes of request req by the named placement:
// least-loaded, random-two (the power of two choices: sample two nodes,
// take the less loaded), or round-robin from rr (a counter the caller
// keeps; it gets the next value back). Draining nodes are left out, and
// so is a node without room for a process's memory (FitsNowhere).
func Place(kind string, nodes []NodeLoad, n int, req resources.Request, rng *rand.Rand, rr int) ([]string, int, error) {
	nodes = slices.DeleteFunc(slices.Clone(nodes), func(l NodeLoad) bool { return l.Draining })
	if kind != "round-robin" {
		nodes = guessUnknown(nodes)
	}
	switch kind {
	case "", "least-loaded":
		out, err := PlaceLeastLoaded(nodes, n, req)
		return out, rr, err
	case "random-two":
		out, err := PlaceRandomTwo(nodes, n, req, rng)
		return out, rr, err
	case "round-robin":
		return PlaceRoundRobin(nodes, n, req, rr)
	}
	return nil, rr, fmt.Errorf("placement %q is not one of least-loaded, random-two, round-robin", kind)
}

// Within keeps the nodes that allowed has, nil allowing every node: a
// run inside a Slurm allocation is placed, and its jobs moved, among the
// allocation's nodes only. allowed also gives the CPUs the allocation
// holds on each (0: unknown): a node counts as no more than those for the
// run's placement, so that a node where the job holds 1 CPU of 64 takes
// its processes as a 1-CPU node would, and the run spreads over the
// allocation by what it holds of each node.
func Within(nodes []NodeLoad, allowed map[string]int) []NodeLoad {
	if allowed == nil {
		return nodes
	}
	var out []NodeLoad
	for _, l := range nodes {
		cpus, ok := allowed[l.ID]
		if !ok {
			continue
		}
		if cpus > 0 {
			l.Capacity = min(l.Capacity, float64(cpus))
		}
		out = append(out, l)
	}
	return out
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
// of two nodes drawn at random among those with room for its memory,
// counting what it placed already.
func PlaceRandomTwo(nodes []NodeLoad, n int, req resources.Request, rng *rand.Rand) ([]string, error) {
	all := usable(nodes)
	if len(all) == 0 {
		return nil, ErrNoNode
	}
	slots := float64(req.Slots())
	out := make([]string, 0, n)
	for k := 0; k < n; k++ {
		var room []int
		for i, x := range all {
			if hasRoom(x, req) {
				room = append(room, i)
			}
		}
		if len(room) == 0 {
			return nil, noRoom(all, req, n-k, n)
		}
		a, b := PickTwo(len(room), rng)
		x, y := &all[room[a]], &all[room[b]]
		if SecondOfTwo(*x, *y, slots) {
			x = y
		}
		out = append(out, x.ID)
		x.take(req)
	}
	return out, nil
}

// PickTwo draws the two candidates of the power of two choices among n
// (n >= 1): two distinct positions, or the one twice when n is 1. The
// simulator draws with it too, among nodes it numbers.
func PickTwo(n int, rng *rand.Rand) (a, b int) {
	a, b = rng.Intn(n), rng.Intn(n)
	if n > 1 {
		for b == a {
			b = rng.Intn(n)
		}
	}
	return a, b
}

// SecondOfTwo says whether the power of two choices takes y over x for
// a process of slots: y's load with it is lower; a tie keeps x.
func SecondOfTwo(x, y NodeLoad, slots float64) bool {
	return y.Load+slots/y.Capacity < x.Load+slots/x.Capacity
}

// PlaceRoundRobin places the processes on the nodes in id order, going on
// from where the last placement stopped (rr), whatever their load: the
// static baseline. A node without room for a process's memory is passed
// over.
func PlaceRoundRobin(nodes []NodeLoad, n int, req resources.Request, rr int) ([]string, int, error) {
	ns := usable(nodes)
	if len(ns) == 0 {
		return nil, rr, ErrNoNode
	}
	out := make([]string, 0, n)
	for k := 0; k < n; k++ {
		placed := false
		for tries := 0; tries < len(ns) && !placed; tries++ {
			x := &ns[rr%len(ns)]
			rr = (rr + 1) % len(ns)
			if hasRoom(*x, req) {
				out = append(out, x.ID)
				x.take(req)
				placed = true
			}
		}
		if !placed {
			return nil, rr, noRoom(ns, req, n-k, n)
		}
	}
	return out, rr, nil
}
