//go:build lockcheck

package lockorder

import (
	"strings"
	"testing"
)

// Without Collect, a lock taken out of order panics, naming both locks.
func TestOutOfOrderPanics(t *testing.T) {
	state.Lock()
	was := state.collect
	state.collect = false
	state.Unlock()
	defer func() {
		state.Lock()
		state.collect = was
		state.Unlock()
	}()
	var a, b Mutex
	a.Init(1, "a")
	b.Init(2, "b")
	b.Lock()
	defer b.Unlock()
	defer func() {
		p := recover()
		if s, ok := p.(string); !ok || !strings.HasPrefix(s, "lock order broken: a (rank 1) taken while b (rank 2) is held") {
			t.Fatalf("recovered %v", p)
		}
	}()
	a.Lock()
	t.Fatal("a was taken while b was held")
}

// HeldHere knows the locks of the calling goroutine only.
func TestHeldHere(t *testing.T) {
	var m Mutex
	m.Init(1, "m")
	if HeldHere(&m) {
		t.Fatal("held before Lock")
	}
	m.Lock()
	other := make(chan bool)
	go func() { other <- HeldHere(&m) }()
	if !HeldHere(&m) || <-other {
		t.Fatal("HeldHere wrong while held")
	}
	m.Unlock()
	if HeldHere(&m) {
		t.Fatal("held after Unlock")
	}
}
