package agent

import (
	"context"
	"log"
	"net"
	"net/http"
	"roam/internal/agent/httpx"
	"roam/internal/agent/limits"
	"roam/internal/connlimit"
	"strings"
)

// Caller is who is on the other end of the unix socket (package httpx).
type Caller = httpx.Caller

func (a *Agent) startAPI() error {
	l := a.cfg.Limits
	ln := connlimit.New(a.parts.API, connlimit.Bounds{Total: l.Connections, PerKey: l.ConnectionsPerUser,
		WriteTimeout: a.cfg.Server.WriteTimeout, Key: httpx.UserKey, Refused: refusedConn(a)})
	mux := http.NewServeMux()
	a.apiRoutes(mux)
	if a.parts.Routes != nil {
		a.parts.Routes(mux, func(r *http.Request) (uint32, bool) { c, ok := httpx.CallerOf(r); return c.UID, ok })
	}
	a.apiLn = ln
	a.rates = limits.NewRates(a.cfg.Limits.RequestsPerSecond)
	a.apiSrv = &http.Server{
		Handler: httpx.BodyWithin(a.cfg.Server.BodyTimeout, httpx.LimitRate(a.rates, mux)),
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			if cred, err := httpx.PeerCred(c); err == nil {
				return httpx.WithCaller(ctx, cred)
			}
			return ctx
		},
		ErrorLog: serverLog(a, "api server", nil),
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
	a.peerSrv = httpx.PeerServer(a.cfg.Server, a.peerMux, serverLog(a, "peer server", func(line string) {
		// Failed TLS handshakes: net/http reports them only so.
		if strings.Contains(line, "TLS handshake error") {
			a.stats.PeerRejected.Add(1)
		}
	}))
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		_ = a.peerSrv.Serve(a.peerLn)
	}()
	return nil
}

// refusedConn counts, for a, a connection closed over a limit
// (connlimit).
func refusedConn(a *Agent) func(key string, total bool) {
	return func(key string, total bool) {
		a.stats.ConnRefused.Add(1)
		a.log.Debug("connection refused over a limit", "uid", key, "total", total)
	}
}

// serverLog is a's log of what net/http says of a server (its ErrorLog,
// the only place it reports them); onLine sees each line first.
func serverLog(a *Agent, msg string, onLine func(string)) *log.Logger {
	return log.New(httpx.LogWriter{Log: a.log, Msg: msg, OnLine: onLine}, "", 0)
}
