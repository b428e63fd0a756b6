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
