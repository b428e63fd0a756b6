package lockorder

import (
	"strings"
	"testing"
)

// Built with the tag, taking a lock of lower or equal rank while holding
// one is recorded; the order the ranks allow is not. Without the tag
// nothing is recorded.
func TestOrder(t *testing.T) {
	Collect()
	var a, b, c Mutex
	a.Init(1, "a")
	b.Init(2, "b")
	c.Init(2, "c")
	before := len(Violations())
	a.Lock()
	b.Lock()
	b.Unlock()
	a.Unlock()
	if got := len(Violations()) - before; got != 0 {
		t.Fatalf("a then b: %d violations", got)
	}
	b.Lock()
	a.Lock() // the wrong way round
	a.Unlock()
	c.Lock() // the same rank
	c.Unlock()
	b.Unlock()
	v := Violations()[before:]
	if !On {
		if len(v) != 0 {
			t.Fatalf("without the tag: %v", v)
		}
		return
	}
	if len(v) != 2 || !strings.HasPrefix(v[0], "a (rank 1) taken while b (rank 2) is held") || !strings.HasPrefix(v[1], "c (rank 2) taken while b (rank 2) is held") {
		t.Fatalf("violations %q", v)
	}
	// A lock let go by another goroutine than its taker is forgotten:
	// taking it again is no violation.
	a.Lock()
	done := make(chan struct{})
	go func() { a.Unlock(); close(done) }()
	<-done
	a.Lock()
	a.Unlock()
	if got := len(Violations()); got != before+2 {
		t.Fatalf("%d violations after a lock let go elsewhere, want 2", got-before)
	}
}
