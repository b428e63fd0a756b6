package agent

// The scheduler's decisions, kept for `roam events`: every node remembers
// its last rounds.MaxEvents, and `roam events` gathers them from every live node.

import (
	"net/http"
	"net/url"
	"sort"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/api"
)

// event records a decision for `roam events`.
func (a *Agent) event(e api.Event) {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	e.Node = a.cfg.NodeID
	a.events.Add(e)
	a.log.Info("event", "kind", e.Kind, "job", e.Job, "from", e.From, "to", e.To, "why", e.Why)
}

// Events is `roam events`: every live node's decisions since a time. An
// event about a job the caller may not touch (or whose owner the node did
// not know) is shown without its reason, which may name the owner's files.
func (a *Agent) Events(c Caller, since time.Time) []api.Event {
	var out []api.Event
	for _, part := range fanOut[[]api.Event](a, http.MethodGet, peer.Events+"?since="+url.QueryEscape(since.Format(time.RFC3339Nano)), nil) {
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
