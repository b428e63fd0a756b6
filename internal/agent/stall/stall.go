// Package stall is the agent's one stall guard. A transfer between agents
// (a dump's pages, the migration stream, a page sink's input) that makes
// no progress for its limit is cut: a link down or a peer gone must end a
// migration, never hang it. A Watchdog does the timing; Conn, Writer and
// Reader report the bytes they move to one. It knows nothing of the
// agent, and holds no lock.
package stall

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Watchdog calls cut once when no progress was reported for its limit.
// Progress is a time stamp, not a message: a page stream reports it on
// every write, tens of thousands of times a second, and waking a goroutine
// for each cost 10-20 % of an eager migration's freeze (measured at 128 MiB
// and 1 GiB). The watchdog wakes once a limit and looks.
type Watchdog struct {
	limit   atomic.Int64 // time.Duration
	last    atomic.Int64 // time of the last progress, UnixNano
	done    chan struct{}
	once    sync.Once
	stalled atomic.Bool
}

// Watch starts a watchdog with limit. cut runs on the watchdog's own
// goroutine, at most once.
func Watch(limit time.Duration, cut func()) *Watchdog {
	w := &Watchdog{done: make(chan struct{})}
	w.limit.Store(int64(limit))
	w.Progress()
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

// Progress restarts the limit; safe from any goroutine.
func (w *Watchdog) Progress() { w.last.Store(time.Now().UnixNano()) }

// Expect sets a new limit, from now (a wait for an answer that may take
// longer than a stall). A limit shorter than the one the watchdog sleeps
// on takes effect when it wakes.
func (w *Watchdog) Expect(d time.Duration) {
	w.limit.Store(int64(d))
	w.Progress()
}

// Stop ends the watchdog; safe to call twice.
func (w *Watchdog) Stop() { w.once.Do(func() { close(w.done) }) }

// Stalled says whether the watchdog cut for want of progress.
func (w *Watchdog) Stalled() bool { return w.stalled.Load() }

// Conn reports every read and write that moves bytes as progress to its
// watchdog, and counts the bytes written. It stops the watchdog when it
// closes if it owns it (Guard).
type Conn struct {
	net.Conn
	wd      *Watchdog
	owns    bool
	written atomic.Int64
}

// Guard wraps c in a watchdog of its own that closes it after limit
// without progress.
func Guard(c net.Conn, limit time.Duration) *Conn {
	return &Conn{Conn: c, wd: Watch(limit, func() { c.Close() }), owns: true}
}

// Watched wraps c to report to wd, which it does not own: closing c
// leaves wd running.
func Watched(c net.Conn, wd *Watchdog) *Conn { return &Conn{Conn: c, wd: wd} }

// Watchdog is the watchdog c reports to.
func (c *Conn) Watchdog() *Watchdog { return c.wd }

// Written is the bytes written through c so far.
func (c *Conn) Written() int64 { return c.written.Load() }

func (c *Conn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		c.wd.Progress()
	}
	return n, err
}

func (c *Conn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	if n > 0 {
		c.written.Add(int64(n))
		c.wd.Progress()
	}
	return n, err
}

func (c *Conn) Close() error {
	if c.owns {
		c.wd.Stop()
	}
	return c.Conn.Close()
}

// CloseWrite half-closes c when its connection can, else closes it.
func (c *Conn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

// Writer reports each write that moves bytes to a watchdog, and counts
// them. One goroutine writes; Written is read after the writes.
type Writer struct {
	w  io.Writer
	wd *Watchdog
	n  int64
}

// NewWriter wraps w to report to wd.
func NewWriter(w io.Writer, wd *Watchdog) *Writer { return &Writer{w: w, wd: wd} }

func (p *Writer) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.n += int64(n)
	if n > 0 {
		p.wd.Progress()
	}
	return n, err
}

// Written is the bytes written through p.
func (p *Writer) Written() int64 { return p.n }

// Reader reports each read that moves bytes to a watchdog.
type Reader struct {
	r  io.Reader
	wd *Watchdog
}

// NewReader wraps r to report to wd.
func NewReader(r io.Reader, wd *Watchdog) *Reader { return &Reader{r: r, wd: wd} }

func (p *Reader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.wd.Progress()
	}
	return n, err
}
