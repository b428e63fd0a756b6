// Package load holds a node's load vector and the openMosix load-information
// dissemination algorithm (seed 000 §3.1), with the improved load-vector
// management of the same paper as a second update policy.
//
// Everything here is pure: no I/O, no goroutines, no clock and no global
// random source. Callers pass the time and a *rand.Rand in, and get back what
// to send. The agent, the simulator and the tests all drive this same code.
package load

import (
	"errors"
	"fmt"
	"iter"
	"math"
	"slices"
	"time"
)

// Tunables, named once. Each says where it comes from.
const (
	// DefaultInterval is how often a node sends its own load (seed 000 §3.1:
	// "each second").
	DefaultInterval = time.Second
	// DefaultVectorSize is the number of entries in the load vector (seed 000
	// §3.1: "a first-in-first-out (FIFO) queue of eight entries").
	DefaultVectorSize = 8
	// DefaultRecentWindow is how long a node that sent us its load counts as
	// having contacted us "recently" (seed 000 §3.1 leaves the length open;
	// a few intervals keeps the first target a live, talking peer).
	DefaultRecentWindow = 5 * time.Second
)

// Policy is how a received entry enters a full load vector.
type Policy string

const (
	// PolicyFIFO is standard openMosix: the newest entry overwrites the oldest.
	PolicyFIFO Policy = "fifo"
	// PolicyBeneficial is the paper's improved load-vector management: a
	// received entry from a node not yet in the vector is kept only when the
	// remote load is lower than the local load.
	PolicyBeneficial Policy = "beneficial"
)

// Policies lists the valid policies, for error messages and flags.
var Policies = []Policy{PolicyFIFO, PolicyBeneficial}

// ErrBadPolicy is returned by ParsePolicy for an unknown name.
var ErrBadPolicy = errors.New("unknown load-vector policy")

// ParsePolicy turns a config string into a Policy.
func ParsePolicy(s string) (Policy, error) {
	p := Policy(s)
	if slices.Contains(Policies, p) {
		return p, nil
	}
	return "", fmt.Errorf("%w %q (allowed: fifo, beneficial)", ErrBadPolicy, s)
}

// Entry is what one node knows of another node's load at one moment.
type Entry struct {
	Node      string  // the node's id
	Addr      string  // the node's agent address (host:port)
	Capacity  float64 // CPU capacity in cores (1.0 = one full core)
	Load      float64 // runnable processes per unit of capacity
	MemFreeMB float64 // free memory in MiB
	// MemJobsMB is the memory the node gives its jobs' requests, in MiB
	// (its jobs.memory_bytes), and MemHeldMB what the requests of the
	// jobs it holds, or has agreed to take, add up to: a job asking for
	// memory goes to it only while both fit. 0 MemJobsMB: the node does
	// not say (an older roam), and placement does not count its memory.
	MemJobsMB float64
	MemHeldMB float64
	// Least is the least CPU time, in seconds, that a job running on the
	// node has had, on every node it ran on; 0 when none runs there. The
	// scheduler's turns read it (sched.ProblemTurn).
	Least float64
	// Waiting: the node's queue has jobs waiting for room (package
	// queue): a fall of another node's memory held is news for it
	// (RoomNews).
	Waiting bool
	// Received is when this node received the entry (local clock), which
	// gives the age of the information.
	Received time.Time
}

// Vector is the fixed-size load vector. The node's own entry is not in it:
// it is local state and always current.
//
// Its entries are a ring: until it is full they are in arrival order from
// the first slot; once full, a new node's entry takes the oldest's slot
// and the oldest is the next slot on, so that a vector that overflows at
// every message (a simulator's 100,000 nodes) writes one entry, not all.
// keys are the entries' nodes' hashes beside them (idKey): a search
// reads them, one cache line for eight, rather than every entry or every
// id's bytes, and compares an id only where its key matches.
type Vector struct {
	size   int
	policy Policy
	keys   []uint64 // keys[i] is idKey(entries[i].Node)
	// small holds keys when the vector has room for at most 8 (the
	// default): a Vector held in a larger struct (a simulator's node) then
	// has its keys in the cache lines the struct's other fields bring. A
	// Vector is therefore not copied once it holds an entry.
	small   [8]uint64
	entries []Entry
	head    int // the oldest entry's slot; 0 unless full
}

// NewVector makes an empty vector of the given size and policy.
func NewVector(size int, policy Policy) *Vector {
	if size < 1 {
		size = 1
	}
	return &Vector{size: size, policy: policy}
}

// NewVectorIn is NewVector with its entries held in buf, whose capacity
// must be at least size: a simulator's 100,000 nodes hold theirs in one
// array, not 100,000 apart.
func NewVectorIn(size int, policy Policy, buf []Entry) *Vector {
	v := NewVector(size, policy)
	v.entries = buf[:0:v.size]
	return v
}

// Entries returns a copy of the entries, oldest first.
func (v *Vector) Entries() []Entry {
	if v.entries == nil {
		return nil
	}
	return append(slices.Clone(v.entries[v.head:]), v.entries[:v.head]...)
}

// All yields the entries, oldest first, without copying them; the
// vector must not change while it runs.
func (v *Vector) All() iter.Seq[Entry] {
	return func(yield func(Entry) bool) {
		for _, part := range [2][]Entry{v.entries[v.head:], v.entries[:v.head]} {
			for _, e := range part {
				if !yield(e) {
					return
				}
			}
		}
	}
}

// At is the i-th entry, oldest first (0 <= i < Len).
func (v *Vector) At(i int) Entry {
	j := v.head + i
	if j >= len(v.entries) {
		j -= len(v.entries)
	}
	return v.entries[j]
}

// Len is the number of entries held.
func (v *Vector) Len() int { return len(v.entries) }

// Update takes a received entry. localLoad is this node's own load at the
// moment of reception (used by the beneficial policy). It reports whether the
// entry was kept.
//
// An entry from a node already in the vector refreshes that entry in place
// under both policies: fresher information about a known node is never worse
// than stale information, and a vector with two entries for one node would
// waste a slot. A new node's entry takes a free slot if there is one. When the
// vector is full, fifo drops the oldest entry to make room; beneficial does
// the same only when the remote load is lower than the local load, and
// otherwise discards the new entry.
func (v *Vector) Update(e Entry, localLoad float64) bool {
	k := idKey(e.Node)
	if i := v.find(k, e.Node); i >= 0 {
		v.entries[i] = e
		return true
	}
	if len(v.entries) < v.size {
		if v.keys == nil {
			v.keys = v.small[:0]
			if v.size > len(v.small) {
				v.keys = make([]uint64, 0, v.size)
			}
		}
		if v.entries == nil {
			v.entries = make([]Entry, 0, v.size)
		}
		v.entries, v.keys = append(v.entries, e), append(v.keys, k)
		return true
	}
	if v.policy == PolicyBeneficial && !(e.Load < localLoad) {
		return false
	}
	v.entries[v.head], v.keys[v.head] = e, k
	if v.head++; v.head == len(v.entries) {
		v.head = 0
	}
	return true
}

// Forget removes a node's entry (the node left or died).
func (v *Vector) Forget(node string) {
	i := v.find(idKey(node), node)
	if i < 0 {
		return
	}
	// Oldest first from slot 0 again, so that the entries after the
	// removed one move up and the free slot is the last.
	rotate(v.entries, v.head)
	rotate(v.keys, v.head)
	v.head = 0
	i = v.find(idKey(node), node)
	v.entries, v.keys = slices.Delete(v.entries, i, i+1), slices.Delete(v.keys, i, i+1)
}

// find is the slot of node's entry, whose key is k; -1 if none.
func (v *Vector) find(k uint64, node string) int {
	for i, x := range v.keys {
		if x == k && v.entries[i].Node == node {
			return i
		}
	}
	return -1
}

// idKey is a node id's FNV-1a hash: two ids of one key are told apart
// by the ids themselves (find).
func idKey(id string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(id); i++ {
		h ^= uint64(id[i])
		h *= 1099511628211
	}
	return h
}

// rotate moves s[k:] before s[:k], in place.
func rotate[T any](s []T, k int) {
	slices.Reverse(s[:k])
	slices.Reverse(s[k:])
	slices.Reverse(s)
}

// Get returns the entry for a node, if the vector holds one.
func (v *Vector) Get(node string) (Entry, bool) {
	i := v.find(idKey(node), node)
	if i < 0 {
		return Entry{}, false
	}
	return v.entries[i], true
}

// Smooth folds a new sample into an exponentially weighted moving average
// with time constant tau, dt after the previous sample — like the kernel's
// load average, only faster, so that a migration shows within seconds.
func Smooth(prev, sample float64, dt, tau time.Duration) float64 {
	if tau <= 0 || dt >= 10*tau {
		return sample
	}
	a := 1 - math.Exp(-float64(dt)/float64(tau))
	return prev + a*(sample-prev)
}
