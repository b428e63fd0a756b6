package rounds

import (
	"sync"
	"time"

	"roam/internal/api"
)

// MaxEvents is how many decisions a node remembers for `roam events`.
const MaxEvents = 500

// Events are the scheduler's decisions on this node, the last MaxEvents,
// kept for `roam events`. Its lock is a leaf: nothing is taken under it.
type Events struct {
	mu  sync.Mutex
	log []api.Event
}

// Add records e.
func (ev *Events) Add(e api.Event) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	ev.log = append(ev.log, e)
	if len(ev.log) > MaxEvents {
		ev.log = ev.log[len(ev.log)-MaxEvents:]
	}
}

// Since is the events after t, oldest first.
func (ev *Events) Since(t time.Time) []api.Event {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	out := []api.Event{}
	for _, e := range ev.log {
		if e.At.After(t) {
			out = append(out, e)
		}
	}
	return out
}
