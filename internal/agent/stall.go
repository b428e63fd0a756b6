package agent

// The agent's one stall guard. A transfer between agents (a dump's pages,
// the migration stream, a page sink's input) that makes no progress for
// stallTimeout is cut: a link down or a peer gone must end a migration,
// never hang it.

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// watchdog calls cut once when no progress was reported for its limit.
type watchdog struct {
	limit   atomic.Int64 // time.Duration
	kick    chan struct{}
	done    chan struct{}
	once    sync.Once
	stalled atomic.Bool
}

// watch starts a watchdog with limit.
func watch(limit time.Duration, cut func()) *watchdog {
	w := &watchdog{kick: make(chan struct{}, 1), done: make(chan struct{})}
	w.limit.Store(int64(limit))
	go func() {
		t := time.NewTimer(limit)
		defer t.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-w.kick:
				t.Reset(time.Duration(w.limit.Load()))
			case <-t.C:
				w.stalled.Store(true)
				cut()
				return
			}
		}
	}()
	return w
}

// progress restarts the limit.
func (w *watchdog) progress() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// expect sets a new limit, from now (a wait for an answer that may take
// longer than a stall).
func (w *watchdog) expect(d time.Duration) {
	w.limit.Store(int64(d))
	w.progress()
}

// stop ends the watchdog; safe to call twice.
func (w *watchdog) stop() { w.once.Do(func() { close(w.done) }) }

// watchedConn reports every read and write that moves bytes as progress
// to its watchdog, and counts the bytes written. It stops the watchdog
// when it closes if it owns it (guard).
type watchedConn struct {
	net.Conn
	wd      *watchdog
	owns    bool
	written atomic.Int64
}

// guard wraps c in a watchdog of its own that closes it after limit
// without progress.
func guard(c net.Conn, limit time.Duration) *watchedConn {
	return &watchedConn{Conn: c, wd: watch(limit, func() { c.Close() }), owns: true}
}

func (c *watchedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.wd.progress()
	}
	return n, err
}

func (c *watchedConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.written.Add(int64(n))
		c.wd.progress()
	}
	return n, err
}

func (c *watchedConn) Close() error {
	if c.owns {
		c.wd.stop()
	}
	return c.Conn.Close()
}

func (c *watchedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

// watchedWriter reports each write that moves bytes to a watchdog, and
// counts them.
type watchedWriter struct {
	w  io.Writer
	wd *watchdog
	n  int64
}

func (p *watchedWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.n += int64(n)
	if n > 0 {
		p.wd.progress()
	}
	return n, err
}

// watchedReader reports each read that moves bytes to a watchdog.
type watchedReader struct {
	r  io.Reader
	wd *watchdog
}

func (p *watchedReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.wd.progress()
	}
	return n, err
}
