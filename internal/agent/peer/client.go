// Package peer is the agent's client of other agents' peer routes: the
// routes' paths (routes.go), the errors that keep their kind across a
// call (errors.go), the messages the concerns send each other
// (wire_*.go, one file a concern), and one call function. A call addressed to this node
// runs its peer routes in process (Loopback), with the same encoding,
// decoding and errors as a call over the network, so no caller needs a
// branch for "the other end is me". Streams (the migration stream, pages,
// the page sink) are not calls: they use HTTP directly.
//
// It holds no state of the agent's: a member's address comes from the
// membership's owner (Client.Addr). It must not import internal/agent.
package peer

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"roam/internal/api"
	"roam/internal/errkind"
)

// Timeout bounds a call to another agent unless the caller says more.
const Timeout = 30 * time.Second

// Client calls peer routes. Its fields are set once, before the first
// call; it is safe for concurrent use.
type Client struct {
	// Addr is a member's peer address, or an ErrUnavailable error naming
	// the node. It must not block for long (it reads the membership).
	Addr func(node string) (string, error)
	// HTTP reaches other agents (mutual TLS); Self this node's own routes
	// in process (a Loopback), for calls to SelfAddr.
	HTTP, Self *http.Client
	SelfAddr   string
}

// Call is Do to a node, within Timeout.
func (c *Client) Call(node, method, path string, in, out any) error {
	return c.CallWithin(Timeout, node, method, path, in, out)
}

// CallWithin is Do to a node, within d.
func (c *Client) CallWithin(d time.Duration, node, method, path string, in, out any) error {
	addr, err := c.Addr(node)
	if err != nil {
		return err
	}
	return c.Do(d, addr, method, path, in, out)
}

// CallAddr is Do within Timeout.
func (c *Client) CallAddr(addr, method, path string, in, out any) error {
	return c.Do(Timeout, addr, method, path, in, out)
}

// Do is the agent's one way to call a peer route: method and path on the
// agent at addr, within d. body is sent as it is when it is an io.Reader,
// as JSON otherwise (nil: no body). The answer is decoded into out (when
// not nil); an error answer becomes the agent error of its status
// (FromStatus), no answer ErrUnavailable.
func (c *Client) Do(d time.Duration, addr, method, path string, body, out any) error {
	r, ok := body.(io.Reader)
	if !ok {
		var err error
		if r, err = api.JSONBody(body); err != nil {
			return err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "https://"+addr+path, r)
	if err != nil {
		return err
	}
	hc := c.HTTP
	if addr == c.SelfAddr {
		hc = c.Self
	}
	return Err(api.Exchange(hc, req, out))
}

// Unavailable is the error of a node whose address is not known.
func Unavailable(node string) error {
	return errkind.New(ErrUnavailable, "node %s is not known", node)
}

// Loopback is the transport of a call from this node to itself: it runs
// the peer routes in process, as the peer port would run them, and hands
// their answer back as if it came over the network. It is safe for
// concurrent use; a call waits for its route's answer or its context.
type Loopback struct {
	Routes http.Handler
	Log    *slog.Logger
}

func (l Loopback) RoundTrip(req *http.Request) (*http.Response, error) {
	// The body is read first, as a remote call sends it before the answer
	// comes: a body that cannot be read fails the call, not the route.
	var body []byte
	if req.Body != nil {
		var err error
		body, err = io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
	}
	// What the peer server would hand the route: the path and query only,
	// the body as it arrived.
	in := req.Clone(req.Context())
	in.URL.Scheme, in.URL.Host = "", ""
	in.Host, in.RemoteAddr, in.RequestURI = req.URL.Host, req.URL.Host, req.URL.RequestURI()
	in.Body, in.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
	w := &loopWriter{header: http.Header{}}
	done := make(chan error, 1)
	go func() { done <- l.serve(w, in) }()
	select {
	case err := <-done:
		if err != nil {
			return nil, err
		}
		return w.response(req), nil
	case <-req.Context().Done():
		// As over the network: the caller stops waiting, the route runs
		// on to its end and its answer is dropped.
		return nil, req.Context().Err()
	}
}

// serve runs the route. A route that panics fails the call, as the peer
// server would by closing the connection, and is logged with its stack.
func (l Loopback) serve(w http.ResponseWriter, r *http.Request) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				l.Log.Error("peer route panicked", "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
			}
			err = fmt.Errorf("peer route %s panicked: %v", r.URL.Path, p)
		}
	}()
	l.Routes.ServeHTTP(w, r)
	return nil
}

// loopWriter is the in-memory http.ResponseWriter of a loopback call.
type loopWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (w *loopWriter) Header() http.Header { return w.header }

// WriteHeader keeps the first status, as net/http's server does.
func (w *loopWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *loopWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

// response is the answer as the client would read it off the wire; a
// route that wrote nothing answered 200 with no body.
func (w *loopWriter) response(req *http.Request) *http.Response {
	w.WriteHeader(http.StatusOK)
	return &http.Response{
		Status:     fmt.Sprintf("%d %s", w.status, http.StatusText(w.status)),
		StatusCode: w.status, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: w.header, Body: io.NopCloser(&w.body), ContentLength: int64(w.body.Len()), Request: req,
	}
}

// Answers says whether node answers on the peer port now (Ping), within
// PingTimeout. Membership can take a live node for dead for a moment:
// when a partition heals, a node that was cut off may still gossip the
// deaths it saw; the node refutes it, but a sweep in between would
// restart its jobs. A node that answers is not restarted from.
func (c *Client) Answers(node string) bool {
	var out struct {
		Node string `json:"node"`
	}
	err := c.CallWithin(PingTimeout, node, http.MethodGet, Ping, nil, &out)
	return err == nil && out.Node == node
}

// PingTimeout bounds Answers: a node cut off does not answer at all.
const PingTimeout = time.Second
