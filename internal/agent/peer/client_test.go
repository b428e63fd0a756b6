package peer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/migrate"
)

// writeJSON and writeError answer as the agent's routes do.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, err error) {
	writeJSON(w, Status(err), api.Error{Error: err.Error()})
}

// decode reads a JSON body as the agent's routes do: bad JSON is
// ErrBadRequest.
func decode(r *http.Request, v any) error {
	if err := json.NewDecoder(r.Body).Decode(v); err != nil {
		return errkind.New(ErrBadRequest, "bad request: %v", err)
	}
	return nil
}

// Every kind of the table comes back as itself across a peer call.
func TestStatusTableRoundTrip(t *testing.T) {
	for _, k := range []error{ErrPermission, ErrNotFound, ErrBadRequest, ErrUnavailable, ErrPinned} {
		err := FromStatus(Status(errkind.New(k, "msg")), "msg")
		if !errors.Is(err, k) || err.Error() != "msg" {
			t.Errorf("%v: came back as %v (%q)", k, err, err)
		}
	}
	if s := Status(errkind.New(ErrConfig, "c")); s != http.StatusBadRequest {
		t.Errorf("ErrConfig: status %d, want 400", s)
	}
	// A restart its home ended is "try again", and says so across a call.
	if err := FromStatus(Status(fmt.Errorf("restart r1: %w", migrate.ErrHomeAborted)), "m"); !errors.Is(err, ErrUnavailable) {
		t.Errorf("a restart its home ended: came back as %v, want ErrUnavailable", err)
	}
	if s := Status(errors.New("other")); s != http.StatusInternalServerError {
		t.Errorf("another error: status %d, want 500", s)
	}
	if err := FromStatus(http.StatusInternalServerError, "x"); err.Error() != "x" || Status(err) != http.StatusInternalServerError {
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
	c := &Client{HTTP: srv.Client(), Self: &http.Client{Transport: Loopback{Routes: mux, Log: logger}}, SelfAddr: "self.invalid:1"}
	remote := strings.TrimPrefix(srv.URL, "https://")

	type result struct {
		out map[string]any
		err error
	}
	call := func(addr, method, path string, body any, d time.Duration) result {
		var out map[string]any
		err := c.Do(d, addr, method, path, body, &out)
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
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := func() any {
				if tc.body == nil {
					return nil
				}
				return tc.body()
			}
			self := call(c.SelfAddr, tc.method, tc.path, body(), tc.d)
			net := call(remote, tc.method, tc.path, body(), tc.d)
			if tc.kind != nil && (!errors.Is(self.err, tc.kind) || !errors.Is(net.err, tc.kind)) {
				t.Fatalf("want %v both ways; loopback %v, network %v", tc.kind, self.err, net.err)
			}
			if (self.err == nil) != (net.err == nil) || (tc.sameMsg && self.err != nil && self.err.Error() != net.err.Error()) {
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
	if err := c.Do(time.Second, c.SelfAddr, http.MethodPost, "/v1/peer/echo", map[string]int{"n": 1}, &out); err != nil || out["n"] != 2 {
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
