//go:build lockcheck

package lockorder

import (
	"bytes"
	"fmt"
	"runtime"
	"strconv"
	"sync"
)

// On says whether locks are checked (the lockcheck tag).
const On = true

// state is every goroutine's held locks, in the order taken.
var state = struct {
	sync.Mutex
	held       map[uint64][]*Mutex
	violations []string
	collect    bool
}{held: map[uint64][]*Mutex{}}

// Collect makes a violation recorded (Violations) instead of a panic: for
// a test binary that reports them all at its end.
func Collect() {
	state.Lock()
	state.collect = true
	state.Unlock()
}

// goid is the calling goroutine's id, read from its stack's first line.
func goid() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	n, _ := strconv.ParseUint(string(b[:bytes.IndexByte(b, ' ')]), 10, 64)
	return n
}

// checkTake panics, or records a violation after Collect, when m's rank
// is not above every lock the goroutine holds.
func checkTake(m *Mutex) {
	id := goid()
	state.Lock()
	defer state.Unlock()
	for _, h := range state.held[id] {
		if h.rank >= m.rank {
			stack := make([]byte, 4096)
			stack = stack[:runtime.Stack(stack, false)]
			v := fmt.Sprintf("%s (rank %d) taken while %s (rank %d) is held\n%s", m.name, m.rank, h.name, h.rank, stack)
			if !state.collect {
				panic("lock order broken: " + v)
			}
			state.violations = append(state.violations, v)
			return
		}
	}
}

func taken(m *Mutex) {
	id := goid()
	state.Lock()
	state.held[id] = append(state.held[id], m)
	state.Unlock()
}

// released forgets m for the goroutine that holds it: the one unlocking,
// or, for a lock handed to another goroutine to release, any.
func released(m *Mutex) {
	id := goid()
	state.Lock()
	defer state.Unlock()
	if drop(id, m) {
		return
	}
	for g := range state.held {
		if drop(g, m) {
			return
		}
	}
}

func drop(g uint64, m *Mutex) bool {
	hs := state.held[g]
	for i := len(hs) - 1; i >= 0; i-- {
		if hs[i] == m {
			hs = append(hs[:i], hs[i+1:]...)
			if len(hs) == 0 {
				delete(state.held, g)
			} else {
				state.held[g] = hs
			}
			return true
		}
	}
	return false
}

// Violations are the orders broken so far, each with its stack.
func Violations() []string {
	state.Lock()
	defer state.Unlock()
	return append([]string(nil), state.violations...)
}

// HeldHere says whether the calling goroutine holds m.
func HeldHere(m *Mutex) bool {
	id := goid()
	state.Lock()
	defer state.Unlock()
	for _, h := range state.held[id] {
		if h == m {
			return true
		}
	}
	return false
}
