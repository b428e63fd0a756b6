package httpx

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
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
