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
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"roam/internal/agent/limits"
	"roam/internal/agent/peer"
	"roam/internal/connlimit"
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
	return &http.Server{Handler: h, ErrorLog: errLog, ReadHeaderTimeout: c.HeaderTimeout, IdleTimeout: c.IdleTimeout, ConnState: ProveOnRequest}
}

// ProveOnRequest is a server's ConnState: a connection whose first
// request was read (after its TLS handshake, on the peer port) is no
// longer held to server.first_request_timeout (connlimit.Prove).
func ProveOnRequest(c net.Conn, s http.ConnState) {
	if s == http.StateActive {
		connlimit.Prove(c)
	}
}

// UserKey is the key of a connection to the roam socket in its limits:
// its user's uid (root's is RootKey), or "" when the kernel gave none
// (held to the total only; its requests are refused for want of a
// caller).
func UserKey(c net.Conn) string {
	if cred, err := PeerCred(c); err == nil {
		return strconv.FormatUint(uint64(cred.UID), 10)
	}
	return ""
}

// RootKey is root's UserKey, which limits.root_connections holds.
const RootKey = "0"

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

// HoldAPI holds the roam socket's connections to l's caps: each user's
// (by SO_PEERCRED), all users' together, root's of its own; and each
// write of an answer to s.WriteTimeout. refused hears of each closed.
func HoldAPI(ln net.Listener, l limits.Limits, s limits.Server, refused func(key string, total bool)) *connlimit.Listener {
	root := func(key string) int {
		if key == RootKey {
			return l.RootConnections
		}
		return 0
	}
	return connlimit.New(ln, connlimit.Bounds{Caps: connlimit.Caps{Total: l.Connections, PerKey: l.ConnectionsPerUser, MakeRoom: true},
		FirstRequest: s.FirstRequestTimeout, WriteTimeout: s.WriteTimeout, Key: UserKey, Own: root, Refused: refused})
}

// HoldPeer holds the peer port's TCP connections, below TLS, to l's
// caps: those of one address, and all strangers' together; a member's
// address (member says which) has its per-address cap outside that
// total, so strangers from many addresses cannot crowd the members out;
// and each write of an answer to s.WriteTimeout (a stream's writes each,
// not the stream).
func HoldPeer(ln net.Listener, l limits.Limits, s limits.Server, member func(ip string) bool, refused func(key string, total bool)) *connlimit.Listener {
	own := func(ip string) int {
		if member(ip) {
			return l.PeerConnectionsPerAddress
		}
		return 0
	}
	return connlimit.New(ln, connlimit.Bounds{Caps: connlimit.Caps{Total: l.PeerConnections, PerKey: l.PeerConnectionsPerAddress, MakeRoom: true},
		FirstRequest: s.FirstRequestTimeout, WriteTimeout: s.WriteTimeout, Key: connlimit.RemoteIP, Own: own, Refused: refused})
}

// Refusals counts in count each connection to listener closed over a
// limit, and logs one at most every refusedLogEvery: a flood of them
// would otherwise fill the log as fast as it comes. The line gives the
// count so far; keyName says what the key is (a uid, an address).
func Refusals(log *slog.Logger, count *atomic.Int64, listener, keyName string) func(key string, total bool) {
	every := &rate.Sometimes{Interval: refusedLogEvery}
	return func(key string, total bool) {
		n := count.Add(1)
		every.Do(func() {
			log.Warn("connection closed over a limit", "listener", listener, keyName, key, "by_total", total, "refused_so_far", n)
		})
	}
}

// refusedLogEvery is how often at most a listener logs a connection it
// closed over a limit.
const refusedLogEvery = 10 * time.Second
