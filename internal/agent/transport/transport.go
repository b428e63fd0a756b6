// Package transport is the agent's real edges to other processes: the
// peer port's TLS transport, which other agents call, and the CLI's unix
// socket. It holds no state and knows nothing of the agent's routes.
package transport

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"roam/internal/rootdir"
	"roam/internal/secret"
)

// TLS is the agent's real Transport (agent.Parts): TCP on Bind, TLS 1.3 with client
// certificates of the cluster's CA.
type TLS struct {
	Config *tls.Config
	Bind   string // host:port of the peer port
}

// Listen opens the peer port: hold bounds its TCP connections, below
// TLS, so that one over a bound is closed before its handshake.
func (t TLS) Listen(hold func(net.Listener) net.Listener) (net.Listener, error) {
	ln, err := net.Listen("tcp", t.Bind)
	if err != nil {
		return nil, err
	}
	return tls.NewListener(hold(ln), t.Config), nil
}

func (t TLS) Dial(ctx context.Context, addr string) (net.Conn, error) {
	d := tls.Dialer{Config: t.Config.Clone(), NetDialer: &net.Dialer{Timeout: dialTimeout}}
	return d.DialContext(ctx, "tcp", addr)
}

// Sender is the member whose certificate made request r on the peer
// port (secret.CertNode), or "".
func (TLS) Sender(r *http.Request) string {
	if r.TLS == nil || len(r.TLS.PeerCertificates) == 0 {
		return ""
	}
	return secret.CertNode(r.TLS.PeerCertificates[0])
}

// dialTimeout bounds connecting to a peer.
const dialTimeout = 5 * time.Second

// ListenAPI opens the CLI's unix socket, readable and writable by every
// local user (each request is checked against its caller's credentials).
func ListenAPI(path string) (net.Listener, error) {
	if err := socketDir(path); err != nil {
		return nil, err
	}
	_ = os.Remove(path) // a socket left by a killed agent
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	if err := os.Chmod(path, 0o666); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// socketDir makes sure the socket's directory exists, root's alone.
func socketDir(path string) error { return rootdir.Ensure(filepath.Dir(path), 0o755) }
