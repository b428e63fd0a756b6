package httpx

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/errkind"
)

// An error is answered with its kind's status and its message as JSON.
func TestWriteError(t *testing.T) {
	w := httptest.NewRecorder()
	WriteError(w, errkind.New(peer.ErrNotFound, "no job %q", "n1.1"))
	var e api.Error
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || w.Code != http.StatusNotFound || e.Error != `no job "n1.1"` {
		t.Fatalf("status %d, body %q (%v)", w.Code, w.Body, err)
	}
}

// A body past MaxBody or not JSON is a bad request.
func TestDecodeIsBounded(t *testing.T) {
	var v map[string]string
	big := `{"a":"` + strings.Repeat("x", MaxBody) + `"}`
	for _, body := range []string{big, "{"} {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		if err := Decode(r, &v); !errors.Is(err, peer.ErrBadRequest) {
			t.Errorf("a body of %d bytes: %v", len(body), err)
		}
	}
}

// The queries: offsets are never negative, since is RFC 3339 or nothing.
func TestQueries(t *testing.T) {
	out, errOff, wait := OutputQuery(httptest.NewRequest(http.MethodGet, "/?out=-5&err=7&wait=2s", nil))
	if out != 0 || errOff != 7 || wait != 2*time.Second {
		t.Fatalf("OutputQuery = %d %d %v", out, errOff, wait)
	}
	if at, err := ParseSince(""); err != nil || !at.IsZero() {
		t.Fatalf("ParseSince(\"\") = %v, %v", at, err)
	}
	if _, err := ParseSince("yesterday"); !errors.Is(err, peer.ErrBadRequest) {
		t.Fatalf("ParseSince(yesterday): %v", err)
	}
}

// A flood of refused connections is counted whole and logged once a
// refusedLogEvery: the first at once, with its key and the count so far.
func TestRefusalsAreLoggedAtABoundedRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var out strings.Builder
		var count atomic.Int64
		refused := Refusals(slog.New(slog.NewTextHandler(&out, nil)), &count, "peer port", "address")
		for range 10000 {
			refused("198.18.83.201", false)
		}
		time.Sleep(refusedLogEvery)
		refused("198.18.83.202", true)
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		if count.Load() != 10001 || len(lines) != 2 {
			t.Fatalf("counted %d, logged %d lines: %q", count.Load(), len(lines), out.String())
		}
		if !strings.Contains(lines[0], "address=198.18.83.201") || !strings.Contains(lines[0], "refused_so_far=1") ||
			!strings.Contains(lines[1], "by_total=true") || !strings.Contains(lines[1], "refused_so_far=10001") {
			t.Fatalf("the lines: %q", lines)
		}
	})
}
