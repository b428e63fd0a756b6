package agent

import (
	"context"
	"log"
	"net"
	"net/http"
	"roam/internal/agent/httpx"
	"roam/internal/agent/limits"
	"roam/internal/agent/peer"
	"roam/internal/connlimit"
	"roam/internal/errkind"
	"strconv"
	"strings"
	"time"
)

// Caller is who is on the other end of the unix socket (package httpx).
type Caller = httpx.Caller

func (a *Agent) startAPI() error {
	l := a.cfg.Limits
	ln := connlimit.New(a.parts.API, connlimit.Bounds{Total: l.Connections, PerKey: l.ConnectionsPerUser,
		WriteTimeout: a.cfg.Server.WriteTimeout, Key: userKey, Refused: refusedConn(a)})
	mux := http.NewServeMux()
	a.apiRoutes(mux)
	if a.parts.Routes != nil {
		a.parts.Routes(mux, func(r *http.Request) (uint32, bool) { c, ok := httpx.CallerOf(r); return c.UID, ok })
	}
	a.apiLn = ln
	a.rates = limits.NewRates(a.cfg.Limits.RequestsPerSecond)
	a.apiSrv = &http.Server{
		Handler: bodyWithin(a.cfg.Server.BodyTimeout, limitRate(a.rates, mux)),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if cred, err := httpx.PeerCred(c); err == nil {
				return httpx.WithCaller(ctx, cred)
			}
			return ctx
		},
		ErrorLog: log.New(&slogWriter{a}, "", 0),
		// A local client that opens a connection and sends nothing is
		// let go; a long answer (an attached run's output) is not cut.
		ReadHeaderTimeout: a.cfg.Server.HeaderTimeout,
		IdleTimeout:       a.cfg.Server.IdleTimeout,
	}
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		_ = a.apiSrv.Serve(ln)
	}()
	return nil
}

// startPeer opens the TLS port other agents talk to, serving a.peerMux.
// Only a client with a certificate from the cluster CA gets past the
// handshake.
func (a *Agent) startPeer() error {
	ln, err := a.parts.Transport.Listen()
	if err != nil {
		return err
	}
	a.peerLn = ln // limits.peer_connections: not yet (docs/security.md)
	a.peerSrv = peerServer(a.cfg.Server, a.peerMux, log.New(&peerLog{a}, "", 0))
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		_ = a.peerSrv.Serve(a.peerLn)
	}()
	return nil
}

// bodyWithin gives a request's body d to arrive (server.body_timeout).
// net/http lifts
// the limit itself once the body is read to its end (its read that
// notices a client gone runs without one), so a long answer after it (an
// attached run's output) is neither cut nor cancelled.
func bodyWithin(d time.Duration, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 && r.Body != nil && r.Body != http.NoBody {
			_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(d))
		}
		next.ServeHTTP(w, r)
	})
}

// peerServer is the HTTP server of the peer port: a connection that does
// not finish its TLS handshake and headers within c.HeaderTimeout is
// closed, so nobody who lacks the secret can hold the agent's connections.
func peerServer(c limits.Server, h http.Handler, errLog *log.Logger) *http.Server {
	return &http.Server{Handler: h, ErrorLog: errLog, ReadHeaderTimeout: c.HeaderTimeout, IdleTimeout: c.IdleTimeout}
}

// userKey is the key of a connection to the roam socket in its limits:
// its user's uid, or "" for root (held to the total only).
func userKey(c net.Conn) string {
	if cred, err := httpx.PeerCred(c); err == nil && cred.UID != 0 {
		return strconv.FormatUint(uint64(cred.UID), 10)
	}
	return ""
}

// refusedConn counts, for a, a connection closed over a limit
// (connlimit).
func refusedConn(a *Agent) func(key string, total bool) {
	return func(key string, total bool) {
		a.stats.connRefused.Add(1)
		a.log.Debug("connection refused over a limit", "uid", key, "total", total)
	}
}

// peerLog counts failed TLS handshakes on the peer port (net/http reports
// them only to the server's ErrorLog).
type peerLog struct{ a *Agent }

func (l *peerLog) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	if strings.Contains(line, "TLS handshake error") {
		l.a.stats.peerRejected.Add(1)
	}
	l.a.log.Warn("peer server", "detail", line)
	return len(p), nil
}

type slogWriter struct{ a *Agent }

func (l *slogWriter) Write(p []byte) (int, error) {
	l.a.log.Warn("api server", "detail", strings.TrimSpace(string(p)))
	return len(p), nil
}

// limitRate refuses a request past its caller's rate; a request without a
// caller (no credentials) is the handler's to refuse.
func limitRate(rates *limits.Rates, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, ok := httpx.CallerOf(r); ok && !rates.Allow(c.UID, time.Now()) {
			writeError(w, errkind.New(peer.ErrLimit, "too many requests: a user may make %v a second (limits.requests_per_second)", rates.PerSecond()))
			return
		}
		next.ServeHTTP(w, r)
	})
}
