package agent

// The page streams between agents. An eager migration's dump writes its
// memory pages, as it reads them, to a page sink (CRIU's page server) on
// the destination; a lazy (post-copy) migration's destination fetches
// pages on demand from a page server the source's dump keeps. Either way
// the agents carry the bytes over the peer port (/v1/peer/pages), and the
// checkpointer (package ckpt) talks to CRIU at each end.

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/agent/stall"
	"roam/internal/ckpt"
	"roam/internal/errkind"
	"roam/internal/netx"
)

// lazyDump is a source's lazy dump serving pages, with the bytes served.
// A dump whose pages nobody fetches for lazyIdle (the destination died,
// or its daemon gave up) is ended, so that the source's CRIU does not
// serve, and hold the job's memory, forever.
type lazyDump struct {
	ckpt.LazyDump
	bytes atomic.Int64
	migr  *migrTable // lists it while it serves
	mid   string
	idle  *stall.Watchdog
}

// lazyIdle is how long a lazy dump serves no page before it is ended: the
// destination's daemon fetches every page in the background, without
// long pauses, once the job runs there.
const lazyIdle = 2 * time.Minute

// startLazyDump starts a lazy dump and returns once the images (all but
// the pages) are written.
func (a *Agent) startLazyDump(mid string, pid int, dir string, mounts []string) (*lazyDump, ckpt.Times, error) {
	ld, times, err := a.ckpt.DumpLazy(pid, dir, mounts)
	if err != nil {
		return nil, times, err
	}
	d := &lazyDump{LazyDump: ld, migr: a.migr, mid: mid}
	d.idle = stall.Watch(lazyIdle, func() {
		a.log.Error("lazy migration: no page fetched for a while; ending the page server", "mid", mid, "idle", lazyIdle)
		ld.End()
	})
	a.migr.ServeLazy(mid, d)
	return d, times, nil
}

// end forgets the dump and returns once it has ended (stopping its page
// server first when the migration failed). Safe to call twice.
func (d *lazyDump) end() {
	d.migr.EndLazy(d.mid)
	d.idle.Stop()
	d.End()
}

// servePages is /v1/peer/pages: it turns the peer connection into a pipe
// to migration mid's page server on this node: the source's, serving a
// lazy migration's pages, or the destination's sink, taking an eager
// dump's.
func (a *Agent) servePages(w http.ResponseWriter, r *http.Request) {
	mid := r.URL.Query().Get("mid")
	d, lazy := a.migr.Lazy(mid)
	var ps net.Conn
	var count *atomic.Int64
	sink := false
	if lazy {
		c, err := d.Pages()
		if err != nil {
			writeError(w, errkind.New(peer.ErrUnavailable, "page server: %v", err))
			return
		}
		ps, count = stall.Watched(c, d.idle), &d.bytes
	} else if ps = a.migr.TakeSinkConn(mid); ps != nil {
		sink = true
	} else {
		writeError(w, errkind.New(peer.ErrNotFound, "no page server for migration %q here", mid))
		return
	}
	conn, rw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		ps.Close()
		return
	}
	_, _ = rw.WriteString("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
	if rw.Flush() != nil {
		ps.Close()
		conn.Close()
		return
	}
	// A dump streams without pause: a sink's connection that stalls is
	// dead (a lazy-pages daemon may pause, and ends on its own).
	if sink {
		conn = stall.Guard(conn, stallTimeout)
	}
	// Bytes the client sent after its request are already buffered.
	var in io.Reader = conn
	if n := rw.Reader.Buffered(); n > 0 {
		b, _ := rw.Reader.Peek(n)
		in = io.MultiReader(bytes.NewReader(bytes.Clone(b)), conn)
	}
	netx.Splice(conn, ps, in, count)
}

// startLazyPages starts, on the destination, the lazy-pages daemon, whose
// connections go to the source's page server over the peer port. The
// returned channel is closed when the daemon ends; stop ends it.
func (a *Agent) startLazyPages(from, mid, images string) (<-chan struct{}, func(), error) {
	addr, err := a.members.PeerAddr(from)
	if err != nil {
		return nil, nil, err
	}
	return a.ckpt.LazyPages(images, func() (net.Conn, error) {
		return a.dialPeerStream(addr, peer.Pages+"?mid="+mid)
	})
}

// dialPeerStream opens a connection to a peer, asks for path and, once the
// peer answers 200, returns the connection as a byte pipe.
func (a *Agent) dialPeerStream(addr, path string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	remote, err := a.parts.Transport.Dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	_ = remote.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(remote, "GET %s HTTP/1.1\r\nHost: roam-node\r\n\r\n", path)
	br := bufio.NewReader(remote)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		remote.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		remote.Close()
		return nil, fmt.Errorf("%s: %s", path, resp.Status)
	}
	_ = remote.SetDeadline(time.Time{})
	return &bufferedConn{Conn: remote, r: br}, nil
}

// bufferedConn reads through a bufio.Reader that may hold bytes already.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b *bufferedConn) CloseWrite() error {
	if c, ok := b.Conn.(interface{ CloseWrite() error }); ok {
		return c.CloseWrite()
	}
	return b.Conn.Close()
}
