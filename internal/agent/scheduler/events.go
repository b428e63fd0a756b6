package scheduler

// The scheduler's decisions, kept for `roam events`: every node remembers
// its last rounds.MaxEvents, and `roam events` gathers them from every
// live node.

import (
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"time"

	"roam/internal/agent/httpx"
	"roam/internal/agent/peer"
	"roam/internal/agent/rounds"
	"roam/internal/api"
)

// Recorder records this node's decisions in kept for `roam events`: each
// stamped with node and, unless it has one, the time, and logged. Every
// concern of the agent records through it.
func Recorder(node string, log *slog.Logger, kept *rounds.Events) func(api.Event) {
	return func(e api.Event) {
		if e.At.IsZero() {
			e.At = time.Now()
		}
		e.Node = node
		kept.Add(e)
		log.Info("event", "kind", e.Kind, "job", e.Job, "from", e.From, "to", e.To, "why", e.Why)
	}
}

// Events is `roam events`: every live node's decisions since a time. An
// event about a job the caller may not touch (or whose owner the node did
// not know) is shown without its reason, which may name the owner's files.
func (s *Scheduler) Events(c httpx.Caller, since time.Time) []api.Event {
	var out []api.Event
	path := peer.Events + "?since=" + url.QueryEscape(since.Format(time.RFC3339Nano))
	for _, part := range peer.FanOut[[]api.Event](s.c.Peers, s.c.Log, s.c.Members.Live(), http.MethodGet, path, nil) {
		out = append(out, part...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	for i, e := range out {
		if e.Job != "" && c.UID != 0 && (e.UID == nil || *e.UID != c.UID) {
			out[i].Why = "(another user's job)"
		}
	}
	return out
}
