package execlock

import (
	"os/exec"
	"sync"
	"testing"
	"time"
)

// Start waits for the exec lock before it starts the child, lets it go
// once the child started, and starts one without a lock too.
func TestStartHoldsTheLockWhileItStarts(t *testing.T) {
	var mu sync.Mutex
	mu.Lock()
	cmd := exec.Command("true")
	started := make(chan error, 1)
	go func() { started <- Start(cmd, &mu) }()
	select {
	case <-started:
		t.Fatal("the child started while the exec lock was held")
	case <-time.After(100 * time.Millisecond):
	}
	mu.Unlock()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	if !mu.TryLock() {
		t.Fatal("the exec lock is still held after the child started")
	}
	mu.Unlock()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := Start(exec.Command("true"), nil); err != nil {
		t.Fatal(err)
	}
}
