package load

import (
	"math"
	"time"
)

// RoomNews is the nodes to send this node's load to now, out of turn,
// for the room its jobs' memory requests leave: those of entries whose
// queues wait for room (Entry.Waiting), when what the requests here add
// up to (held, in MiB) changed from what it was at the last call that
// said so (*last). A fall is room to take; a rise, room another home
// took, which a home that saw it free would otherwise send a start to,
// in vain. At most once per quarter interval (*next, the time before
// which it stays silent; a change held back is news at the next call).
// The homes otherwise hear of it at the next entry sent to them, a second
// or more later: time their jobs wait while the memory is free.
func RoomNews(now time.Time, entries []Entry, held float64, last *float64, next *time.Time, interval time.Duration) []string {
	const epsilon = 1.0 / (1 << 10) // MiB rounding (sched's memEpsilon)
	if math.Abs(held-*last) <= epsilon || now.Before(*next) {
		return nil
	}
	var out []string
	for _, e := range entries {
		if e.Waiting {
			out = append(out, e.Node)
		}
	}
	*last, *next = held, now.Add(interval/4)
	return out
}
