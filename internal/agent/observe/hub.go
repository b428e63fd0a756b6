package observe

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"roam/internal/api"
)

// Source is what the hub asks the agent. Each func may take as long as a
// fan-out to every node (a few seconds at worst) and is called with no
// lock of the hub held; none is called by two goroutines at once.
type Source struct {
	// Nodes is the membership with each node's load and free memory, as
	// this node knows them (no fan-out).
	Nodes func() []api.NodeInfo
	// Jobs is every job of every live node, as root sees them.
	Jobs func() []api.Job
	// Events is every live node's decisions since a time, as root sees
	// them.
	Events func(since time.Time) []api.Event
}

// sample is the nodes' figures at one time.
type sample struct {
	At    time.Time  `json:"at"`
	Nodes []NodeView `json:"nodes"`
}

// Hub polls the Source and sends what changed to every open page, each
// in its scope. Pages are bounded in all and per key (streams).
type Hub struct {
	src Source

	mu      sync.Mutex
	history []sample // oldest first, at most historyLen
	jobs    []api.Job
	jobsAt  time.Time
	seenMig map[string]bool // MIDs of the migrations already told
	primed  bool            // the jobs were polled once: later MIDs are news
	events  []event         // the newest keepEvents
	since   time.Time       // the next events poll's
	clients map[*client]bool
	perKey  map[string]int
	anon    int    // clients without a token
	histMsg []byte // the history as JSON, made once a sample (hello)

	jobsMu sync.Mutex // one jobs fetch at a time (the pages' or a scrape's)
	wake   chan struct{}
}

// client is one open page.
type client struct {
	scope Scope
	key   string
	out   chan []byte
	gone  chan struct{} // closed when the hub cut it (too far behind)
	last  string        // the jobs view last sent
}

// NewHub makes a hub over src; Run drives it.
func NewHub(src Source) *Hub {
	return &Hub{src: src, seenMig: map[string]bool{}, clients: map[*client]bool{}, perKey: map[string]int{}, wake: make(chan struct{}, 1)}
}

// Run samples the nodes every sampleEvery and, while a page is open,
// polls jobs and events, until ctx ends.
func (h *Hub) Run(ctx context.Context) {
	samples := time.NewTicker(sampleEvery)
	jobs := time.NewTicker(jobsEvery)
	events := time.NewTicker(eventsEvery)
	defer samples.Stop()
	defer jobs.Stop()
	defer events.Stop()
	h.sampleNodes(time.Now())
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-samples.C:
			h.sampleNodes(now)
		case <-jobs.C:
			if h.open() > 0 {
				h.pollJobs(0)
			}
		case <-events.C:
			if h.open() > 0 {
				h.pollEvents(time.Now())
			}
		case <-h.wake: // a page opened: show it the jobs now (as fetched
			// within jobsEvery: opening pages makes no more fan-outs)
			h.pollJobs(jobsEvery)
		}
	}
}

func (h *Hub) open() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.clients)
}

func (h *Hub) sampleNodes(now time.Time) {
	ns := nodeViews(h.src.Nodes())
	if len(ns) > maxHistoryNodes {
		ns = ns[:maxHistoryNodes]
	}
	s := sample{At: now, Nodes: ns}
	msg := sse("nodes", s)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.history = append(h.history, s)
	if len(h.history) > historyLen {
		h.history = h.history[len(h.history)-historyLen:]
	}
	h.histMsg = nil
	for c := range h.clients {
		h.send(c, msg)
	}
}

// fetchJobs asks for every job, or gives the last answer when it is
// younger than maxAge.
func (h *Hub) fetchJobs(maxAge time.Duration) []api.Job {
	h.jobsMu.Lock()
	defer h.jobsMu.Unlock()
	h.mu.Lock()
	if !h.jobsAt.IsZero() && time.Since(h.jobsAt) < maxAge {
		defer h.mu.Unlock()
		return h.jobs
	}
	h.mu.Unlock()
	js := h.src.Jobs()
	h.mu.Lock()
	defer h.mu.Unlock()
	h.jobs, h.jobsAt = js, time.Now()
	return js
}

// pollJobs fetches the jobs, tells each page what changed in its view,
// and turns each migration not yet told into an event.
func (h *Hub) pollJobs(maxAge time.Duration) {
	js := h.fetchJobs(maxAge)
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	first := !h.primed
	h.primed = true
	for _, j := range js {
		for _, m := range j.MigrationLog {
			if m.MID == "" || h.seenMig[m.MID] {
				continue
			}
			h.seenMig[m.MID] = true
			if first || now.Sub(m.At) > newsWindow {
				// Before any page, or of a job whose home did not answer
				// the last polls: history, not news.
				continue
			}
			kind := "migrate"
			if !m.OK {
				kind = "migrate-failed"
			}
			h.add(event{EventView: EventView{At: m.At, Kind: kind, Job: j.ID, From: m.From, To: m.To, FreezeMS: m.FreezeMS, Seen: now}, uid: j.UID, owned: true})
		}
	}
	h.forgetMigrations(js)
	views := map[Scope]string{}
	for c := range h.clients {
		v, ok := views[c.scope]
		if !ok {
			b, _ := json.Marshal(Jobs(c.scope, js))
			v = string(b)
			views[c.scope] = v
		}
		if v != c.last {
			c.last = v
			h.send(c, []byte("event: jobs\ndata: "+v+"\n\n"))
		}
	}
}

// forgetMigrations keeps only the MIDs of jobs still listed, so the set
// is bounded by the jobs' migration logs; h.mu is held.
func (h *Hub) forgetMigrations(js []api.Job) {
	keep := map[string]bool{}
	for _, j := range js {
		for _, m := range j.MigrationLog {
			if h.seenMig[m.MID] {
				keep[m.MID] = true
			}
		}
	}
	h.seenMig = keep
}

// pollEvents fetches the decisions since the last poll. A migration's
// own event is left out: the jobs' migration logs tell every migration,
// a manual one too.
func (h *Hub) pollEvents(now time.Time) {
	h.mu.Lock()
	since := h.since
	h.mu.Unlock()
	if since.IsZero() {
		since = now.Add(-time.Minute)
	}
	es := h.src.Events(since)
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, e := range es {
		if e.At.After(h.since) {
			h.since = e.At
		}
		if e.Kind == "migrate" {
			continue
		}
		ev := event{EventView: EventView{At: e.At, Kind: e.Kind, Job: e.Job, From: e.From, To: e.To, Why: e.Why, Seen: now}}
		if e.UID != nil {
			ev.uid, ev.owned = *e.UID, true
		}
		h.add(ev)
	}
	if h.since.IsZero() {
		h.since = since
	}
}

// add keeps e and sends it to every page in its scope; h.mu is held.
func (h *Hub) add(e event) {
	h.events = append(h.events, e)
	if len(h.events) > keepEvents {
		h.events = h.events[len(h.events)-keepEvents:]
	}
	for c := range h.clients {
		h.send(c, sse("event", e.view(c.scope)))
	}
}

// send queues msg for c, or cuts c when it is too far behind; h.mu is
// held.
func (h *Hub) send(c *client, msg []byte) {
	select {
	case c.out <- msg:
	default:
		h.drop(c)
	}
}

// drop forgets c; h.mu is held.
func (h *Hub) drop(c *client) {
	if !h.clients[c] {
		return
	}
	delete(h.clients, c)
	if !c.scope.User {
		h.anon--
	}
	if h.perKey[c.key]--; h.perKey[c.key] == 0 {
		delete(h.perKey, c.key)
	}
	close(c.gone)
}

// errStreams is the refusal of a page past the bounds.
type errStreams struct{ perKey, anon bool }

func (e errStreams) Error() string {
	if e.anon {
		return fmt.Sprintf("web view: at most %d pages without a token open at once on this node (roam web gives you one)", maxAnonStreams)
	}
	if e.perKey {
		return fmt.Sprintf("web view: at most %d pages open at once for one user or address", maxStreamsPerKey)
	}
	return fmt.Sprintf("web view: at most %d pages open at once on this node", maxStreams)
}

// join opens a page for scope, counted under key, and queues what it
// shows first: the scope, the nodes' history and the recent events.
func (h *Hub) join(s Scope, key string) (*client, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case len(h.clients) >= maxStreams:
		return nil, errStreams{}
	case h.perKey[key] >= maxStreamsPerKey:
		return nil, errStreams{perKey: true}
	case !s.User && h.anon >= maxAnonStreams:
		return nil, errStreams{anon: true}
	}
	c := &client{scope: s, key: key, out: make(chan []byte, clientQueue), gone: make(chan struct{})}
	h.clients[c] = true
	h.perKey[key]++
	if !s.User {
		h.anon++
	}
	if h.histMsg == nil { // once a sample, not once a page
		h.histMsg, _ = json.Marshal(h.history)
	}
	scope, _ := json.Marshal(s.String())
	c.out <- []byte(fmt.Sprintf("event: hello\ndata: {\"scope\":%s,\"history\":%s,\"window_s\":%g}\n\n", scope, h.histMsg, (historyLen * sampleEvery).Seconds()))
	for _, e := range h.events {
		c.out <- sse("event", e.view(s))
	}
	select {
	case h.wake <- struct{}{}:
	default:
	}
	return c, nil
}

// leave closes a page.
func (h *Hub) leave(c *client) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.drop(c)
	if len(h.clients) == 0 {
		h.primed = false // no page saw what happens now: no news of it later
	}
}

// sse is one server-sent event of JSON data; a ping when v does not
// encode (a page would take an empty data line for a broken one).
func sse(name string, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(": ping\n\n")
	}
	return []byte("event: " + name + "\ndata: " + string(b) + "\n\n")
}
