package agent

import (
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/secret"
)

// Every kind of the table comes back as itself across a peer call.
func TestStatusTableRoundTrip(t *testing.T) {
	for _, k := range []error{ErrPermission, ErrNotFound, ErrBadRequest, ErrUnavailable, ErrPinned} {
		err := statusError(errorStatus(errkind.New(k, "msg")), "msg")
		if !errors.Is(err, k) || err.Error() != "msg" {
			t.Errorf("%v: came back as %v (%q)", k, err, err)
		}
	}
	if s := errorStatus(errkind.New(ErrConfig, "c")); s != http.StatusBadRequest {
		t.Errorf("ErrConfig: status %d, want 400", s)
	}
	if s := errorStatus(errors.New("other")); s != http.StatusInternalServerError {
		t.Errorf("another error: status %d, want 500", s)
	}
	if err := statusError(http.StatusInternalServerError, "x"); err.Error() != "x" || errorStatus(err) != http.StatusInternalServerError {
		t.Errorf("500 came back as %v", err)
	}
}

// testRoutes are peer routes for the loopback test.
func testRoutes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/peer/echo", func(w http.ResponseWriter, r *http.Request) {
		var in map[string]int
		if err := decode(r, &in); err != nil {
			writeError(w, err)
			return
		}
		in["n"]++
		writeJSON(w, http.StatusOK, in)
	})
	mux.HandleFunc("POST /v1/peer/raw", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		writeJSON(w, http.StatusOK, map[string]string{"got": string(b), "q": r.URL.Query().Get("id")})
	})
	mux.HandleFunc("GET /v1/peer/missing", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errkind.New(ErrNotFound, "job x.1 is not here"))
	})
	mux.HandleFunc("GET /v1/peer/pinned", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errkind.New(ErrPinned, "x.1: pinned"))
	})
	mux.HandleFunc("GET /v1/peer/boom", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, errors.New("boom"))
	})
	mux.HandleFunc("GET /v1/peer/empty", func(w http.ResponseWriter, r *http.Request) {})
	mux.HandleFunc("GET /v1/peer/panic", func(w http.ResponseWriter, r *http.Request) { panic("bad route") })
	mux.HandleFunc("GET /v1/peer/slow", func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done()
		time.Sleep(50 * time.Millisecond)
		writeJSON(w, http.StatusOK, struct{}{})
	})
	return mux
}

// A call to this node's own address runs its routes in process and comes
// back as the same call over the network would: the same answer, the same
// error kinds and messages.
func TestLoopbackAnswersAsThePeerPortWould(t *testing.T) {
	mux := testRoutes()
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the panic's report
	srv.StartTLS()
	defer srv.Close()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := &Agent{log: logger, peerHTTP: srv.Client(), selfAddr: "self.invalid:1"}
	a.selfHTTP = &http.Client{Transport: loopback{routes: mux, log: logger}}
	remote := strings.TrimPrefix(srv.URL, "https://")

	type result struct {
		out map[string]any
		err error
	}
	call := func(addr, method, path string, body any, d time.Duration) result {
		var out map[string]any
		err := a.peerDo(d, addr, method, path, body, &out)
		return result{out, err}
	}
	cases := []struct {
		name, method, path string
		body               func() any // a reader is read once: one per call
		d                  time.Duration
		kind               error // nil: no error
		sameMsg            bool  // the message is the same both ways
	}{
		{"json", http.MethodPost, "/v1/peer/echo", func() any { return map[string]int{"n": 41} }, time.Second, nil, true},
		{"bad json", http.MethodPost, "/v1/peer/echo", func() any { return strings.NewReader("{") }, time.Second, ErrBadRequest, true},
		{"raw body and query", http.MethodPost, "/v1/peer/raw?id=n1.7", func() any { return strings.NewReader("bytes\n") }, time.Second, nil, true},
		{"no body", http.MethodPost, "/v1/peer/raw", nil, time.Second, nil, true},
		{"not found", http.MethodGet, "/v1/peer/missing", nil, time.Second, ErrNotFound, true},
		{"pinned", http.MethodGet, "/v1/peer/pinned", nil, time.Second, ErrPinned, true},
		{"plain error", http.MethodGet, "/v1/peer/boom", nil, time.Second, nil, true},
		{"empty answer", http.MethodGet, "/v1/peer/empty", nil, time.Second, nil, true},
		{"no route", http.MethodGet, "/v1/peer/nowhere", nil, time.Second, ErrNotFound, true},
		{"wrong method", http.MethodPost, "/v1/peer/missing", nil, time.Second, nil, true},
		{"panic", http.MethodGet, "/v1/peer/panic", nil, time.Second, ErrUnavailable, false},
		{"time-out", http.MethodGet, "/v1/peer/slow", nil, 100 * time.Millisecond, ErrUnavailable, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			body := func() any {
				if c.body == nil {
					return nil
				}
				return c.body()
			}
			self := call(a.selfAddr, c.method, c.path, body(), c.d)
			net := call(remote, c.method, c.path, body(), c.d)
			if c.kind != nil && (!errors.Is(self.err, c.kind) || !errors.Is(net.err, c.kind)) {
				t.Fatalf("want %v both ways; loopback %v, network %v", c.kind, self.err, net.err)
			}
			if (self.err == nil) != (net.err == nil) || (c.sameMsg && self.err != nil && self.err.Error() != net.err.Error()) {
				t.Fatalf("loopback %v, network %v", self.err, net.err)
			}
			if self.err == nil && !equalJSON(self.out, net.out) {
				t.Fatalf("loopback %v, network %v", self.out, net.out)
			}
			for _, k := range []error{ErrPermission, ErrNotFound, ErrBadRequest, ErrUnavailable, ErrPinned} {
				if errors.Is(self.err, k) != errors.Is(net.err, k) {
					t.Fatalf("kind %v: loopback %v, network %v", k, self.err, net.err)
				}
			}
		})
	}
	var out map[string]int
	if err := a.peerDo(time.Second, a.selfAddr, http.MethodPost, "/v1/peer/echo", map[string]int{"n": 1}, &out); err != nil || out["n"] != 2 {
		t.Fatalf("echo: %v, %v", out, err)
	}
}

func equalJSON(a, b map[string]any) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// A node's calls to itself (ps, policies, events, a job's record) run in
// process: they need no peer port, and errors keep their kind.
func TestSelfCallsNeedNoPeerPort(t *testing.T) {
	sf := filepath.Join(t.TempDir(), "secret")
	if err := secret.New().WriteFile(sf); err != nil {
		t.Fatal(err)
	}
	a, _ := startAgent(t, "a", sf)
	a.peerLn.Close()
	if ps := a.Policies(); len(ps) != 1 || ps[0].Node != "a" {
		t.Errorf("policies: %+v", ps)
	}
	if jobs := a.PS(Caller{}, true); len(jobs) != 0 {
		t.Errorf("ps: %+v", jobs)
	}
	a.event(api.Event{Kind: "test"})
	// A zone east of UTC: its "+" must reach the route as a plus.
	since := time.Now().Add(-time.Hour).In(time.FixedZone("east", 3600))
	if evs := a.Events(Caller{}, since); len(evs) != 1 || evs[0].Kind != "test" {
		t.Errorf("events: %+v", evs)
	}
	if _, err := a.record("a.1"); !errors.Is(err, ErrNotFound) || err.Error() != "unknown job a.1" {
		t.Errorf("record of an unknown job: %v", err)
	}
	if _, err := a.record("b.1"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("record of another node's job: %v", err)
	}
}
