package httpx

// The agent's servers' shapes: the time a request's body has, the peer
// port's server, a connection's key in the socket's limits, the per-user
// request rate, and net/http's error log into the agent's.

import (
	"log"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"roam/internal/agent/limits"
	"roam/internal/agent/peer"
	"roam/internal/errkind"
)

// BodyWithin gives a request's body d to arrive (server.body_timeout).
// net/http lifts
// the limit itself once the body is read to its end (its read that
// notices a client gone runs without one), so a long answer after it (an
// attached run's output) is neither cut nor cancelled.
func BodyWithin(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
		}
		next.ServeHTTP(w, r)
	})
}

// PeerServer is the HTTP server of the peer port: a connection that does
// not finish its TLS handshake and headers within c.HeaderTimeout is
// closed, so nobody who lacks the secret can hold the agent's connections.
func PeerServer(c limits.Server, h http.Handler, errLog *log.Logger) *http.Server {
	return &http.Server{Handler: h, ErrorLog: errLog, ReadHeaderTimeout: c.HeaderTimeout, IdleTimeout: c.IdleTimeout}
}

// UserKey is the key of a connection to the roam socket in its limits:
// its user's uid, or "" for root (held to the total only).
func UserKey(c net.Conn) string {
	if cred, err := PeerCred(c); err == nil && cred.UID != 0 {
		return strconv.FormatUint(uint64(cred.UID), 10)
	}
	return ""
}

// LimitRate refuses a request past its caller's rate; a request without a
// caller (no credentials) is the handler's to refuse.
func LimitRate(rates *limits.Rates, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := CallerOf(r); ok && !rates.Allow(c.UID, time.Now()) {
			WriteError(w, errkind.New(peer.ErrLimit, "too many requests: a user may make %v a second (limits.requests_per_second)", rates.PerSecond()))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// LogWriter writes what net/http logs of a server into Log, as Msg with
// the line as its detail; OnLine, when set, sees each line first.
type LogWriter struct {
	Log    *slog.Logger
	Msg    string
	OnLine func(line string)
}

func (l LogWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	if l.OnLine != nil {
		l.OnLine(line)
	}
	l.Log.Warn(l.Msg, "detail", line)
	return len(p), nil
}
