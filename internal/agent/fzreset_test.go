package agent

import (
	"net/http"
	"runtime"
	"testing"
	"time"

	"roam/internal/agent/peer"
)

// The fuzz harness's reset ends what the last input left running: a
// migration whose home cannot be told retries its note until the agent
// stops, and the drivers keep the stop they were made with. Left running,
// such goroutines pile up across inputs until the pool gives up its agent
// for every input (fzLeftMax), the slow path.
func TestFuzzResetEndsTheLastInputsGoroutines(t *testing.T) {
	a := newStoreAgent(t)
	base := runtime.NumGoroutine()
	body := fzJSON(t, peer.MigrateOutRequest{ID: fzLocal, To: "n3"})
	for range 3 {
		if w := a.call(http.MethodPost, peer.MigrateOut, body); w.Code == http.StatusOK {
			t.Fatalf("the move was answered %d: the fake node lets nothing move", w.Code)
		}
		a.reset(t)
	}
	waitUntil(t, 10*time.Second, "the inputs' goroutines end", func() bool { return runtime.NumGoroutine() <= base })
}
