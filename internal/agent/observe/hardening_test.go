package observe

import (
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"roam/internal/api"
)

// Pages without a token take at most maxAnonStreams of the node's
// streams: the rest are kept for users who have one.
func TestAnonymousPagesLeaveRoomForTokens(t *testing.T) {
	s := startServer(t, newFakeCluster(), "")
	base := "http://" + s.Addr()
	for i := range maxAnonStreams {
		from := net.IPv4(127, 0, 2, byte(1+i/maxStreamsPerKey))
		if _, code := openStreamFrom(t, base, "", from); code != http.StatusOK {
			t.Fatalf("page %d without a token: %d", i+1, code)
		}
	}
	if _, code := openStreamFrom(t, base, "", net.IPv4(127, 0, 2, 99)); code != http.StatusTooManyRequests {
		t.Fatalf("page %d without a token: %d, want 429", maxAnonStreams+1, code)
	}
	tok, _ := mintFor(t, s, 70001)
	if _, code := openStream(t, base, tokenOf(t, tok.URL)); code != http.StatusOK {
		t.Fatalf("a user's page once the pages without a token are at their bound: %d", code)
	}
}

// A page's stream ends when its token expires: what it was allowed to
// see stops there.
func TestStreamEndsWithItsToken(t *testing.T) {
	s := New(Config{Addr: "127.0.0.1:0"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	s.tokens = NewTokens(time.Second, maxTokens, maxTokensPerUID)
	if err := s.Start(newFakeCluster().source(), prometheus.NewRegistry()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	tok, _ := mintFor(t, s, 70001)
	st, code := openStream(t, "http://"+s.Addr(), tokenOf(t, tok.URL))
	if code != http.StatusOK {
		t.Fatalf("open: %d", code)
	}
	deadline := time.After(30 * time.Second)
	for {
		select {
		case _, open := <-st.msgs:
			if !open {
				return // ended
			}
		case <-deadline:
			t.Fatal("the stream outlived its token by 29 s")
		}
	}
}

// On a loopback listener, a Host that is a name other than localhost
// (DNS rebinding) is refused; the page carries headers that keep it out
// of frames and other origins' scripts; a HEAD of the stream is refused.
func TestLoopbackListenerRefusesOtherHostsAndFrames(t *testing.T) {
	s := startServer(t, newFakeCluster(), "")
	_, port, _ := net.SplitHostPort(s.Addr())
	get := func(method, host, path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, "http://"+s.Addr()+path, nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	for host, want := range map[string]int{
		"attacker.example:" + port: http.StatusMisdirectedRequest,
		"attacker.example":         http.StatusMisdirectedRequest,
		"localhost:" + port:        http.StatusOK,
		"127.0.0.1:" + port:        http.StatusOK,
		"[::1]:" + port:            http.StatusOK,
	} {
		if got := get(http.MethodGet, host, "/metrics").StatusCode; got != want {
			t.Errorf("Host %s: %d, want %d", host, got, want)
		}
	}
	h := get(http.MethodGet, "127.0.0.1:"+port, "/").Header
	if !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") || h.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("the page's headers: %v", h)
	}
	if got := get(http.MethodHead, "127.0.0.1:"+port, "/events").StatusCode; got != http.StatusMethodNotAllowed {
		t.Errorf("HEAD /events: %d, want 405", got)
	}
}

// A node id or user name that is not valid UTF-8 is scraped made valid,
// not a panic of the collector.
func TestOddLabelsDoNotPanicTheScrape(t *testing.T) {
	f := newFakeCluster()
	f.mu.Lock()
	f.nodes = append(f.nodes, api.NodeInfo{ID: "n\xff", Alive: true, Version: "v\xfe"})
	f.mu.Unlock()
	hub := NewHub(f.source())
	reg := prometheus.NewRegistry()
	if err := Register(reg, hub, f.source(), true); err != nil {
		t.Fatal(err)
	}
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, fam := range fams {
		if fam.GetName() == "roam_member_up" {
			for _, m := range fam.GetMetric() {
				found = found || labelIs(m, "node", "n?")
			}
		}
	}
	if !found {
		t.Fatal("the member of an odd id is not scraped as n?")
	}
}

func labelIs(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}
