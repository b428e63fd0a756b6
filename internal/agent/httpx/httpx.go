// Package httpx is the agent's HTTP edge, solved once for every route of
// both servers: a request body is read bounded (MaxBody), an answer is
// JSON, an error is answered with its status from package peer's one
// table (peer.Status), and the query parameters the routes share are
// parsed here. It knows nothing of the agent and holds no state.
package httpx

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/errkind"
)

// MaxBody bounds every request body the agent reads.
const MaxBody = 8 << 20

// Decode reads a JSON body, bounded; a bad body is a bad request.
func Decode(r *http.Request, v any) error {
	dec := json.NewDecoder(io.LimitReader(r.Body, MaxBody))
	if err := dec.Decode(v); err != nil {
		return errkind.New(peer.ErrBadRequest, "request body: %v", err)
	}
	return nil
}

// WriteJSON answers with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteError answers with err's status and message.
func WriteError(w http.ResponseWriter, err error) {
	WriteJSON(w, peer.Status(err), api.Error{Error: err.Error()})
}

// OutputQuery reads an output poll's offsets (never negative) and wait.
func OutputQuery(r *http.Request) (outOff, errOff int64, wait time.Duration) {
	q := r.URL.Query()
	outOff, _ = strconv.ParseInt(q.Get("out"), 10, 64)
	errOff, _ = strconv.ParseInt(q.Get("err"), 10, 64)
	wait, _ = time.ParseDuration(q.Get("wait"))
	return max(outOff, 0), max(errOff, 0), wait
}

// EventsSince is a handler answering with the events f gives after
// ?since= (an RFC 3339 time; none: all of them).
func EventsSince(f func(time.Time) []api.Event) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		since, err := ParseSince(r.URL.Query().Get("since"))
		if err != nil {
			WriteError(w, err)
			return
		}
		WriteJSON(w, http.StatusOK, f(since))
	}
}

// ParseSince reads a since parameter: an RFC 3339 time, or the zero time
// when empty.
func ParseSince(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, errkind.New(peer.ErrBadRequest, "since %q is not an RFC 3339 time", s)
	}
	return t, nil
}
