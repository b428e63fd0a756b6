package agent

import (
	"context"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"roam/internal/agent/limits"
	"roam/internal/agent/peer"
	"roam/internal/connlimit"
	"roam/internal/errkind"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ctxKey keys the caller's credentials in a request's context.
type ctxKey struct{}

// Caller is who is on the other end of the unix socket, from SO_PEERCRED
// and SO_PEERGROUPS: the kernel's word at connect time, never the
// request's, nor /proc read later (where the pid may be another process's
// by then).
type Caller struct {
	UID, GID uint32
	PID      int32
	Groups   []uint32 // supplementary groups
}

// callerOf returns the caller of a request on the API socket.
func callerOf(r *http.Request) (Caller, bool) {
	c, ok := r.Context().Value(ctxKey{}).(Caller)
	return c, ok
}

// peerCred reads SO_PEERCRED from a unix connection.
func peerCred(c net.Conn) (Caller, error) {
	if w, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = w.NetConn() // held to the connection limits
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return Caller{}, errors.New("not a unix connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return Caller{}, err
	}
	var cred *syscall.Ucred
	var groups []uint32
	var cerr, gerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
		groups, gerr = peerGroups(int(fd))
	}); err != nil {
		return Caller{}, err
	}
	if cerr != nil {
		return Caller{}, cerr
	}
	if gerr != nil {
		return Caller{}, gerr
	}
	return Caller{UID: cred.Uid, GID: cred.Gid, PID: cred.Pid, Groups: groups}, nil
}

// peerGroups reads SO_PEERGROUPS: the peer's supplementary groups when it
// connected. The kernel says how much room it needs when there is too
// little.
func peerGroups(fd int) ([]uint32, error) {
	n := 64
	for {
		buf := make([]uint32, n)
		size := uint32(4 * n)
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&size)), 0)
		switch {
		case errno == 0:
			return buf[:size/4], nil
		case errno == unix.ERANGE && int(size/4) > n && size/4 <= 1<<16:
			n = int(size / 4)
		default:
			return nil, fmt.Errorf("SO_PEERGROUPS: %w", errno)
		}
	}
}

func (a *Agent) startAPI() error {
	l := a.cfg.Limits
	ln := connlimit.New(a.parts.API, connlimit.Bounds{Total: l.Connections, PerKey: l.ConnectionsPerUser,
		WriteTimeout: a.cfg.Server.WriteTimeout, Key: userKey, Refused: refusedConn(a)})
	mux := http.NewServeMux()
	a.apiRoutes(mux)
	if a.parts.Routes != nil {
		a.parts.Routes(mux, func(r *http.Request) (uint32, bool) { c, ok := callerOf(r); return c.UID, ok })
	}
	a.apiLn = ln
	a.rates = limits.NewRates(a.cfg.Limits.RequestsPerSecond)
	a.apiSrv = &http.Server{
		Handler: bodyWithin(a.cfg.Server.BodyTimeout, limitRate(a.rates, mux)),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if cred, err := peerCred(c); err == nil {
				return context.WithValue(ctx, ctxKey{}, cred)
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

// newPeerMux builds the routes other agents call. Start builds it before
// any request can come in, since a call to this node itself goes straight
// to it (see peerDo).
func (a *Agent) newPeerMux() *http.ServeMux {
	mux := http.NewServeMux()
	a.peerRoutes(mux)
	return mux
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
	if cred, err := peerCred(c); err == nil && cred.UID != 0 {
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
		if c, ok := callerOf(r); ok && !rates.Allow(c.UID, time.Now()) {
			writeError(w, errkind.New(peer.ErrLimit, "too many requests: a user may make %v a second (limits.requests_per_second)", rates.PerSecond()))
			return
		}
		next.ServeHTTP(w, r)
	})
}
