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
// Progress is a time stamp, not a message: a page stream reports it on
// every write, tens of thousands of times a second, and waking a goroutine
// for each cost 10-20 % of an eager migration's freeze (measured at 128 MiB
// and 1 GiB). The watchdog wakes once a limit and looks.
type watchdog struct {
	limit   atomic.Int64 // time.Duration
	last    atomic.Int64 // time of the last progress, UnixNano
	done    chan struct{}
	once    sync.Once
	stalled atomic.Bool
}

// watch starts a watchdog with limit.
func watch(limit time.Duration, cut func()) *watchdog {
	w := &watchdog{done: make(chan struct{})}
	w.limit.Store(int64(limit))
	w.progress()
	go func() {
		for {
			left := time.Duration(w.limit.Load()) - time.Since(time.Unix(0, w.last.Load()))
			if left <= 0 {
				w.stalled.Store(true)
				cut()
				return
			}
			t := time.NewTimer(left)
			select {
			case <-w.done:
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
	return w
}

// progress restarts the limit.
func (w *watchdog) progress() { w.last.Store(time.Now().UnixNano()) }

// expect sets a new limit, from now (a wait for an answer that may take
// longer than a stall). A limit shorter than the one the watchdog sleeps
// on takes effect when it wakes.
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
