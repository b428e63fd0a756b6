package httpx

// The handlers' shapes, shared by every route of the agent: a JSON call,
// a call with the CLI caller, a call with one query parameter.

import (
	"net/http"

	"roam/internal/agent/peer"
	"roam/internal/errkind"
)

// QueryCall is a handler that calls f with the query parameter param and
// answers {} or f's error.
func QueryCall(param string, f func(string) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := f(r.URL.Query().Get(param)); err != nil {
			WriteError(w, err)
			return
		}
		WriteJSON(w, http.StatusOK, struct{}{})
	}
}

// CallerJSON is JSONCall for the CLI's endpoints: f also gets the caller
// (from SO_PEERCRED).
func CallerJSON[T, R any](f func(Caller, T) (R, error)) http.HandlerFunc {
	return CallerFunc(func(c Caller, w http.ResponseWriter, r *http.Request) {
		JSONCall(func(in T) (R, error) { return f(c, in) })(w, r)
	})
}

// JSONCall is a handler that decodes a T, calls f and answers with its
// result or its error.
func JSONCall[T, R any](f func(T) (R, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in T
		if err := Decode(r, &in); err != nil {
			WriteError(w, err)
			return
		}
		out, err := f(in)
		if err != nil {
			WriteError(w, err)
			return
		}
		WriteJSON(w, http.StatusOK, out)
	}
}

// CallerFunc wraps a handler that needs the caller of the unix socket.
func CallerFunc(h func(Caller, http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, ok := CallerOf(r)
		if !ok {
			WriteError(w, errkind.New(peer.ErrPermission, "caller credentials unavailable"))
			return
		}
		h(c, w, r)
	}
}
