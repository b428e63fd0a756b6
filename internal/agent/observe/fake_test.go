package observe

import (
	"bufio"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"roam/internal/api"
)

// fakeCluster is a Source the tests change as they go.
type fakeCluster struct {
	mu     sync.Mutex
	nodes  []api.NodeInfo
	jobs   []api.Job
	events []api.Event
}

func f64(v float64) *float64 { return &v }
func u32(v uint32) *uint32   { return &v }

func newFakeCluster() *fakeCluster {
	return &fakeCluster{
		nodes: []api.NodeInfo{
			{ID: "1", Alive: true, Self: true, Capacity: 1, Load: f64(0.5), MemFreeMB: f64(100), Version: "v9"},
			{ID: "2", Alive: true, Capacity: 0.5, Load: f64(2), MemFreeMB: f64(50), Draining: true, Version: "v9"},
			{ID: "3", Alive: false, Capacity: 0.5, Version: "v8"},
		},
		jobs: []api.Job{
			{ID: "1.1", User: "alice", UID: 70001, Home: "1", Node: "2", State: api.StateRunning, Cmd: "alice-secret-sim"},
			{ID: "1.2", User: "alice", UID: 70001, Home: "1", Node: "1", State: api.StateRunning, Cmd: "alice-other"},
			{ID: "1.3", User: "bob", UID: 70002, Home: "1", Node: "1", State: api.StateStarting, Cmd: "bob-sweep"},
			{ID: "2.1", User: "bob", UID: 70002, Home: "2", Node: "2", State: api.StateRunning, Cmd: "bob-on-2"},
			{ID: "1.4", User: "bob", UID: 70002, Home: "1", Node: "1", State: api.StateFinished, Cmd: "bob-done"},
		},
	}
}

func (f *fakeCluster) source() Source {
	return Source{
		Nodes: func() []api.NodeInfo { f.mu.Lock(); defer f.mu.Unlock(); return append([]api.NodeInfo{}, f.nodes...) },
		Jobs:  func() []api.Job { f.mu.Lock(); defer f.mu.Unlock(); return append([]api.Job{}, f.jobs...) },
		Events: func(since time.Time) []api.Event {
			f.mu.Lock()
			defer f.mu.Unlock()
			var out []api.Event
			for _, e := range f.events {
				if e.At.After(since) {
					out = append(out, e)
				}
			}
			return out
		},
	}
}

// startServer runs a Server on a loopback port of its own over f, with
// an agent registry holding one gauge of the agent's.
func startServer(t *testing.T, f *fakeCluster, webConfig string) *Server {
	t.Helper()
	return startServerWith(t, f, Config{Addr: "127.0.0.1:0", WebConfigFile: webConfig})
}

// startServerWith is startServer of the config c.
func startServerWith(t *testing.T, f *fakeCluster, c Config) *Server {
	t.Helper()
	agentReg := prometheus.NewRegistry()
	agentReg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "roam", Name: "node_load", Help: "the agent's"}, func() float64 { return 0.5 }))
	s := New(c, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err := s.Start(f.source(), agentReg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// stream is an open event stream of a page.
type stream struct {
	resp *http.Response
	msgs chan sseMsg
	seen []sseMsg // every message read so far
}

type sseMsg struct{ name, data string }

// openStream opens /events with token ("" for none) and reads its
// messages in the background until the test ends.
func openStream(t *testing.T, base, token string) (*stream, int) {
	t.Helper()
	return openStreamFrom(t, base, token, nil)
}

// openStreamFrom is openStream from the loopback address from (nil: the
// system's choice).
func openStreamFrom(t *testing.T, base, token string, from net.IP) (*stream, int) {
	t.Helper()
	u := base + "/events"
	if token != "" {
		u += "?token=" + token
	}
	cl := http.DefaultClient
	if from != nil {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: from}}
		cl = &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	}
	resp, err := cl.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		resp.Body.Close()
		return nil, resp.StatusCode
	}
	st := &stream{resp: resp, msgs: make(chan sseMsg, 1024)}
	t.Cleanup(func() { resp.Body.Close() })
	go func() {
		defer close(st.msgs)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		var m sseMsg
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, "event: "):
				m.name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				m.data = line[len("data: "):]
			case line == "" && m.name != "":
				st.msgs <- m
				m = sseMsg{}
			}
		}
	}()
	return st, http.StatusOK
}

// waitFor finds the first message, among those read so far and those
// to come, named name that satisfies ok, and fails the test after 10 s.
func (st *stream) waitFor(t *testing.T, name string, ok func(data string) bool) string {
	t.Helper()
	for _, m := range st.seen {
		if m.name == name && ok(m.data) {
			return m.data
		}
	}
	deadline := time.After(10 * time.Second)
	for {
		select {
		case m, open := <-st.msgs:
			if !open {
				t.Fatalf("the stream ended before a %s message", name)
			}
			st.seen = append(st.seen, m)
			if m.name == name && ok(m.data) {
				return m.data
			}
		case <-deadline:
			t.Fatalf("no %s message as wanted within 10 s", name)
		}
	}
}

func (s *Server) hubForTest() *Hub {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hub
}

// expireJobs makes the next scrape fetch the jobs again.
func (h *Hub) expireJobs() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.jobsAt = time.Time{}
}
