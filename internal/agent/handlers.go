package agent

// The handlers' shapes, shared by every route: a JSON call, a call with
// the CLI caller, a call with one query parameter, and a body read that
// ends when it makes no progress.

import (
	"net/http"
	"roam/internal/agent/httpx"
	"roam/internal/agent/peer"
	"roam/internal/errkind"
)

// queryCall is a handler that calls f with the query parameter param and
// answers {} or f's error.
func queryCall(param string, f func(string) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := f(r.URL.Query().Get(param)); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, struct{}{})
	}
}

// callerJSON is jsonCall for the CLI's endpoints: f also gets the caller
// (from SO_PEERCRED).
func callerJSON[T, R any](f func(Caller, T) (R, error)) http.HandlerFunc {
	return withCaller(func(c Caller, w http.ResponseWriter, r *http.Request) {
		jsonCall(func(in T) (R, error) { return f(c, in) })(w, r)
	})
}

// jsonCall is a handler that decodes a T, calls f and answers with its
// result or its error.
func jsonCall[T, R any](f func(T) (R, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in T
		if err := decode(r, &in); err != nil {
			writeError(w, err)
			return
		}
		out, err := f(in)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// withCaller wraps a handler that needs the caller of the unix socket.
func withCaller(h func(Caller, http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, ok := httpx.CallerOf(r)
		if !ok {
			writeError(w, errkind.New(peer.ErrPermission, "caller credentials unavailable"))
			return
		}
		h(c, w, r)
	}
}
