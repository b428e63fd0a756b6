package agent

// The agent's one stall guard. A transfer between agents (a dump's pages,
// the migration stream, a page sink's input) that makes no progress for
// stallTimeout is cut: a link down or a peer gone must end a migration,
// never hang it.

import (
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

// watchedConn reports every read and write that moves bytes to a
// watchdog it does not own.
type watchedConn struct {
	net.Conn
	wd *watchdog
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
		c.wd.progress()
	}
	return n, err
}

func (c *watchedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Conn.Close()
}

// guardedConn reports every read and write that moves bytes as progress
// to its watchdog, and counts the bytes written.
type guardedConn struct {
	net.Conn
	w       *watchdog
	written atomic.Int64
}

// guard wraps c in a watchdog that closes it after limit without progress.
func guard(c net.Conn, limit time.Duration) *guardedConn {
	g := &guardedConn{Conn: c}
	g.w = watch(limit, func() { c.Close() })
	return g
}

func (g *guardedConn) Read(b []byte) (int, error) {
	n, err := g.Conn.Read(b)
	if n > 0 {
		g.w.progress()
	}
	return n, err
}

func (g *guardedConn) Write(b []byte) (int, error) {
	n, err := g.Conn.Write(b)
	if n > 0 {
		g.written.Add(int64(n))
		g.w.progress()
	}
	return n, err
}

func (g *guardedConn) Close() error {
	g.w.stop()
	return g.Conn.Close()
}

func (g *guardedConn) CloseWrite() error {
	if cw, ok := g.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return g.Conn.Close()
}
