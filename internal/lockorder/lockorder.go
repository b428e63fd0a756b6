// Package lockorder is a mutex that knows its place in a lock order. Each
// Mutex has a Rank; a goroutine may take a lock only while every lock it
// holds has a lower rank. Built with the tag lockcheck, every Lock checks
// that: a violation panics (a roamd built so dies with the stack of the
// lock it took), or, after Collect, is recorded (Violations) for a test
// binary to report at its end. `make test` builds and tests with the tag,
// so the in-process harness and the end-to-end tests fail on any order
// the agent's doc.go does not allow; built without it, a Mutex is a
// sync.Mutex and a rank.
//
// It does no I/O and starts no goroutine.
package lockorder

import "sync"

// Rank is a lock's place in the order: a goroutine takes locks of
// increasing rank only. Locks of one rank (the job spools' locks, two
// migrations' locks) are never held together.
type Rank int

// Mutex is a sync.Mutex with a rank and a name, set once with Init before
// the first Lock.
type Mutex struct {
	mu   sync.Mutex
	rank Rank
	name string
}

// Init sets the lock's rank and its name (for the violations' text).
// Every Mutex is given its place before it is used: an uninitialized one
// has rank 0, below every other.
func (m *Mutex) Init(rank Rank, name string) {
	m.rank, m.name = rank, name
}

// Lock takes the lock, checking the order first (lockcheck builds).
func (m *Mutex) Lock() {
	checkTake(m)
	m.mu.Lock()
	taken(m)
}

// TryLock takes the lock if it is free; a lock taken so is held as any.
func (m *Mutex) TryLock() bool {
	if !m.mu.TryLock() {
		return false
	}
	checkTake(m)
	taken(m)
	return true
}

// Unlock lets the lock go.
func (m *Mutex) Unlock() {
	released(m)
	m.mu.Unlock()
}
