package stall

import (
	"net"
	"testing"
	"testing/synctest"
	"time"
)

// A guarded connection that moves nothing for its limit is closed, and
// its watchdog says it stalled; one that keeps moving bytes is not. On
// the bubble's clock: a loaded machine's 20 ms sleep may take the whole
// limit on the real one.
func TestGuardCutsAStalledConn(t *testing.T) {
	synctest.Test(t, guardCutsAStalledConn)
}

func guardCutsAStalledConn(t *testing.T) {
	a, b := net.Pipe()
	defer b.Close()
	g := Guard(a, 50*time.Millisecond)
	defer g.Close()
	go func() {
		buf := make([]byte, 1)
		for {
			if _, err := b.Read(buf); err != nil {
				return
			}
		}
	}()
	for range 5 { // 100 ms of progress, twice the limit
		if _, err := g.Write([]byte{1}); err != nil {
			t.Fatalf("write while progressing: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if g.Watchdog().Stalled() {
		t.Fatal("a conn that progressed was cut")
	}
	if g.Written() != 5 {
		t.Fatalf("written = %d, want 5", g.Written())
	}
	deadline := time.Now().Add(5 * time.Second)
	for !g.Watchdog().Stalled() {
		if time.Now().After(deadline) {
			t.Fatal("a stalled conn was not cut")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := g.Write([]byte{1}); err == nil {
		t.Fatal("a cut conn still writes")
	}
}

// A stopped watchdog never cuts.
func TestStopBeforeTheLimit(t *testing.T) {
	cut := make(chan struct{}, 1)
	w := Watch(20*time.Millisecond, func() { cut <- struct{}{} })
	w.Stop()
	w.Stop()
	select {
	case <-cut:
		t.Fatal("a stopped watchdog cut")
	case <-time.After(100 * time.Millisecond):
	}
}
