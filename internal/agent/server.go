package agent

import (
	"context"
	"log"
	"net"
	"net/http"
	"roam/internal/agent/httpx"
	"roam/internal/agent/limits"
	"strings"
)

// Caller is who is on the other end of the unix socket (package httpx).
type Caller = httpx.Caller

func (a *Agent) startAPI() error {
	ln := httpx.HoldAPI(a.parts.API, a.cfg.Limits, a.cfg.Server, httpx.Refusals(a.log, &a.stats.ConnRefused, "roam socket", "uid"))
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
		ConnState:         httpx.ProveOnRequest,
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
// handshake; the connections are counted before it, by the address they
// come from (limits.peer_connections, peer_connections_per_address).
func (a *Agent) startPeer() error {
	ln, err := a.parts.Transport.Listen(func(ln net.Listener) net.Listener {
		a.peerHeld = httpx.HoldPeer(ln, a.cfg.Limits, a.cfg.Server, a.members.HasIP, httpx.Refusals(a.log, &a.stats.ConnRefused, "peer port", "address"))
		return a.peerHeld
	})
	if err != nil {
		return err
	}
	a.peerLn = ln
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

// serverLog is a's log of what net/http says of a server (its ErrorLog,
// the only place it reports them); onLine sees each line first.
func serverLog(a *Agent, msg string, onLine func(string)) *log.Logger {
	return log.New(httpx.LogWriter{Log: a.log, Msg: msg, OnLine: onLine}, "", 0)
}
