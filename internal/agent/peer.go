package agent

// Calls to other agents' peer routes, and to this agent's own: a call
// addressed to this node runs its peer routes in process (loopback), with
// the same encoding, decoding and errors as a call over the network, so no
// caller needs a branch for "the other end is me". Streams (the migration
// stream, pages, the page sink) are not calls: they go over the network.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/sched"
)

func (a *Agent) peerAddrOf(node string) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if p := a.known[node]; p != nil {
		return p.peerAddr
	}
	return ""
}

// peerAddr is a member's peer address, or an error naming the node.
func (a *Agent) peerAddr(node string) (string, error) {
	if addr := a.peerAddrOf(node); addr != "" {
		return addr, nil
	}
	return "", errkind.New(ErrUnavailable, "node %s is not known", node)
}

// peerCall is peerDo to a node, within peerTimeout.
func (a *Agent) peerCall(node, method, path string, in, out any) error {
	return a.peerCallWithin(peerTimeout, node, method, path, in, out)
}

// peerCallWithin is peerDo to a node.
func (a *Agent) peerCallWithin(d time.Duration, node, method, path string, in, out any) error {
	addr, err := a.peerAddr(node)
	if err != nil {
		return err
	}
	return a.peerDo(d, addr, method, path, in, out)
}

// peerCallAddr is peerDo within peerTimeout.
func (a *Agent) peerCallAddr(addr, method, path string, in, out any) error {
	return a.peerDo(peerTimeout, addr, method, path, in, out)
}

// peerDo is the agent's one way to call a peer route: method and path on
// the agent at addr, within d. body is sent as it is when it is an
// io.Reader, as JSON otherwise (nil: no body). The answer is decoded into
// out (when not nil); an error answer becomes the agent error of its status
// (statusError), no answer ErrUnavailable. A call to this node's own
// address runs its peer routes in process (loopback).
func (a *Agent) peerDo(d time.Duration, addr, method, path string, body, out any) error {
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
	hc := a.peerHTTP
	if addr == a.selfAddr {
		hc = a.selfHTTP
	}
	return peerErr(api.Exchange(hc, req, out))
}

// peerErr turns a peer exchange's error into the agent's kinds.
func peerErr(err error) error {
	var te *api.TransportError
	var re *api.RemoteError
	switch {
	case errors.As(err, &te):
		return errkind.New(ErrUnavailable, "%v", te.Err)
	case errors.As(err, &re):
		return statusError(re.Status, re.Msg)
	}
	return err
}

// loopback is the transport of a call from this node to itself: it runs
// the peer routes in process, as the peer port would run them, and hands
// their answer back as if it came over the network. It is safe for
// concurrent use; a call waits for its route's answer or its context.
type loopback struct {
	routes http.Handler
	log    *slog.Logger
}

func (l loopback) RoundTrip(req *http.Request) (*http.Response, error) {
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
func (l loopback) serve(w http.ResponseWriter, r *http.Request) (err error) {
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				l.log.Error("peer route panicked", "path", r.URL.Path, "panic", p, "stack", string(debug.Stack()))
			}
			err = fmt.Errorf("peer route %s panicked: %v", r.URL.Path, p)
		}
	}()
	l.routes.ServeHTTP(w, r)
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

// fanOut makes the same peer call to every live node, this one included,
// and returns the answers in node order: a node that does not answer
// within psTimeout is left out, not waited for.
func fanOut[T any](a *Agent, method, path string, in any) []T {
	a.mu.Lock()
	var nodes []string
	for id, p := range a.known {
		if p.alive {
			nodes = append(nodes, id)
		}
	}
	a.mu.Unlock()
	sort.Slice(nodes, func(i, j int) bool { return sched.IDLess(nodes[i], nodes[j]) })
	out := make([]*T, len(nodes))
	var wg sync.WaitGroup
	for i, id := range nodes {
		wg.Go(func() {
			var v T
			if err := a.peerCallWithin(psTimeout, id, method, path, in, &v); err != nil {
				a.log.Debug("fan out", "node", id, "path", path, "err", err)
				return
			}
			out[i] = &v
		})
	}
	wg.Wait()
	var res []T
	for _, v := range out {
		if v != nil {
			res = append(res, *v)
		}
	}
	return res
}
