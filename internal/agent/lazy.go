package agent

// Lazy (post-copy) migration: CRIU dumps the job without its memory pages
// and serves them from a page server; the destination restores at once and
// a lazy-pages daemon fetches pages on demand (userfaultfd) and the rest in
// the background. CRIU's page server and daemon speak plain TCP, so each
// listens on loopback in its own node, and the agents carry the stream over
// the peer TLS port (/v1/peer/pages), counting the bytes.
//
// CRIU's RPC has no call that starts the lazy-pages daemon, so the
// destination runs `criu lazy-pages` as a command.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"roam/internal/ckpt"
	"roam/internal/errkind"
	"roam/internal/migrate"
)

// lazyDump is a source's CRIU dump serving pages.
type lazyDump struct {
	port  int
	done  chan struct{} // closed when CRIU's dump call ended: all pages served, or failed
	err   error         // its result, once done
	bytes atomic.Int64
	a     *Agent
	mid   string
}

// startLazyDump starts a lazy dump and returns once the images (all but
// the pages) are written.
func (a *Agent) startLazyDump(mid string, pid int, dir string, mounts []string) (*lazyDump, error) {
	port, err := loopbackPort()
	if err != nil {
		return nil, err
	}
	d := &lazyDump{port: port, done: make(chan struct{}), a: a, mid: mid}
	ready := make(chan struct{})
	var readyOnce sync.Once
	go func() {
		d.err = a.criu.Dump(ckpt.DumpOpts{PID: pid, Dir: dir, Mounts: mounts, Lazy: true,
			PageAddr: "127.0.0.1", PagePort: port, Ready: func() { readyOnce.Do(func() { close(ready) }) }})
		close(d.done)
	}()
	select {
	case <-ready:
	case <-d.done:
		if d.err == nil {
			return nil, errors.New("criu dump ended before its images were ready")
		}
		return nil, d.err
	}
	a.jobs.mu.Lock()
	if a.migr.lazy == nil {
		a.migr.lazy = map[string]*lazyDump{}
	}
	a.migr.lazy[mid] = d
	a.jobs.mu.Unlock()
	return d, nil
}

// wait waits for the page server to have served every page.
func (d *lazyDump) wait() error {
	<-d.done
	return d.err
}

// end forgets the dump and returns once CRIU's dump call has ended; on a
// failed migration it first stops CRIU's page server, by connecting and
// closing (CRIU then ends its dump call). Safe to call twice.
func (d *lazyDump) end() {
	d.a.jobs.mu.Lock()
	delete(d.a.migr.lazy, d.mid)
	d.a.jobs.mu.Unlock()
	select {
	case <-d.done:
		return
	default:
	}
	if c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", d.port), time.Second); err == nil {
		c.Close()
	}
	<-d.done
}

func loopbackPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// servePages is /v1/peer/pages: it turns the TLS connection into a pipe
// to migration mid's CRIU page server on this node: the source's, serving
// a lazy migration's pages, or the destination's sink, taking a streamed
// dump's.
func (a *Agent) servePages(w http.ResponseWriter, r *http.Request) {
	mid := r.URL.Query().Get("mid")
	a.jobs.mu.Lock()
	d := a.migr.lazy[mid]
	a.jobs.mu.Unlock()
	var ps net.Conn
	var count *atomic.Int64
	sink := false
	if d != nil {
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", d.port), 5*time.Second)
		if err != nil {
			writeError(w, errkind.New(ErrUnavailable, "page server: %v", err))
			return
		}
		ps, count = c, &d.bytes
	} else if ps = a.takeSinkConn(mid); ps != nil {
		sink = true
	} else {
		writeError(w, errkind.New(ErrNotFound, "no page server for migration %q here", mid))
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
	// Bytes the client sent after its request are already buffered. A
	// dump streams without pause: a sink's connection that stalls is
	// dead (a lazy-pages daemon may pause, and ends on its own).
	var in io.Reader = conn
	if sink {
		in = &deadlineReader{r: conn, extend: func() { _ = conn.SetReadDeadline(time.Now().Add(stallTimeout)) }}
	}
	if n := rw.Reader.Buffered(); n > 0 {
		b, _ := rw.Reader.Peek(n)
		in = io.MultiReader(bytes.NewReader(bytes.Clone(b)), in)
	}
	splice(conn, ps, in, count)
}

// splice copies both ways between a (read from aIn) and b until either
// side ends; n counts the bytes from b to a (the pages).
func splice(a, b net.Conn, aIn io.Reader, n *atomic.Int64) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(b, aIn)
		closeWrite(b)
	}()
	go func() {
		defer wg.Done()
		k, _ := io.Copy(a, b)
		if n != nil {
			n.Add(k)
		}
		closeWrite(a)
	}()
	wg.Wait()
	a.Close()
	b.Close()
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// startLazyPages starts, on the destination, the tunnel to the source's
// page server and CRIU's lazy-pages daemon, and waits until the daemon
// listens for the restore. The returned channel is closed when the daemon
// ends.
func (a *Agent) startLazyPages(hdr migrate.Header, images string) (chan struct{}, error) {
	addr, err := a.peerAddr(hdr.From)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go a.tunnelPages(c, addr, hdr.MID)
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	cmd := exec.Command(a.criu.Path, "lazy-pages", "--page-server", "--address", "127.0.0.1",
		"--port", fmt.Sprint(port), "-D", images, "-o", "lazy-pages.log", "-v4")
	a.execMu.Lock()
	err = cmd.Start()
	a.execMu.Unlock()
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("criu lazy-pages: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		ln.Close()
		close(done)
	}()
	sock := filepath.Join(images, "lazy-pages.socket")
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(sock); err == nil {
			return done, nil
		}
		select {
		case <-done:
			return nil, fmt.Errorf("criu lazy-pages: %s", tail(filepath.Join(images, "lazy-pages.log")))
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			return nil, errors.New("criu lazy-pages did not start within 10 s")
		}
	}
}

// tunnelPages carries one connection of the lazy-pages daemon to the
// source's page server, over the peer TLS port.
func (a *Agent) tunnelPages(local net.Conn, addr, mid string) {
	remote, err := a.dialPeerStream(addr, "/v1/peer/pages?mid="+mid)
	if err != nil {
		a.log.Warn("lazy pages: source", "err", err)
		local.Close()
		return
	}
	splice(local, remote, local, nil)
}

// dialPeerStream opens a TLS connection to a peer, asks for path and,
// once the peer answers 200, returns the connection as a byte pipe.
func (a *Agent) dialPeerStream(addr, path string) (net.Conn, error) {
	d := tls.Dialer{Config: a.tls.Clone(), NetDialer: &net.Dialer{Timeout: 5 * time.Second}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	rc, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	remote := rc.(*tls.Conn)
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
	if c, ok := b.Conn.(*tls.Conn); ok {
		return c.CloseWrite()
	}
	return nil
}

// tail is the last line of a log, for an error message.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}
