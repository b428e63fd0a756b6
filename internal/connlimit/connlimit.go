// Package connlimit bounds what connections a listener holds: at most a
// total at once, at most so many for any one key (a user of a unix
// socket), and a write that does not progress within a time ends its
// connection (a client that never reads its answers holds nothing for
// long). A connection over a bound is accepted and closed at once, so the
// kernel's queue does not fill behind it and no one else waits.
//
// It holds no policy of its own: the caller names the key of a
// connection and the bounds. It does no I/O but on the connections.
package connlimit

import (
	"net"
	"sync"
	"time"
)

// Bounds are a listener's bounds.
type Bounds struct {
	// Total is the most connections open at once; PerKey the most for
	// one key ("" is counted in the total only).
	Total, PerKey int
	// WriteTimeout ends a connection one of whose writes does not finish
	// within it (0: no bound).
	WriteTimeout time.Duration
	// Key names a connection's key, when it is accepted.
	Key func(net.Conn) string
	// Refused, when set, is told of each connection closed over a bound.
	Refused func(key string, total bool)
}

// Listener is a net.Listener held to Bounds.
type Listener struct {
	net.Listener
	b     Bounds
	mu    sync.Mutex
	total int
	per   map[string]int
}

// New holds ln to b.
func New(ln net.Listener, b Bounds) *Listener {
	if b.Key == nil {
		b.Key = func(net.Conn) string { return "" }
	}
	return &Listener{Listener: ln, b: b, per: map[string]int{}}
}

// Accept returns the next connection within the bounds; those over them
// are closed as they come.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key := l.b.Key(c)
		l.mu.Lock()
		overTotal := l.total >= l.b.Total
		overKey := key != "" && l.per[key] >= l.b.PerKey
		if !overTotal && !overKey {
			l.total++
			if key != "" {
				l.per[key]++
			}
		}
		l.mu.Unlock()
		if overTotal || overKey {
			if l.b.Refused != nil { // before the client can see the close
				l.b.Refused(key, overTotal)
			}
			c.Close()
			continue
		}
		return &conn{Conn: c, l: l, key: key}, nil
	}
}

// Open is how many connections are open, and how many of key's.
func (l *Listener) Open(key string) (total, ofKey int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.total, l.per[key]
}

func (l *Listener) release(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.total--
	if key != "" {
		if l.per[key]--; l.per[key] <= 0 {
			delete(l.per, key)
		}
	}
}

// conn is an accepted connection: its close gives its place back, and
// each write must finish within the bound.
type conn struct {
	net.Conn
	l    *Listener
	key  string
	once sync.Once
}

func (c *conn) Write(p []byte) (int, error) {
	if d := c.l.b.WriteTimeout; d > 0 {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(d))
	}
	return c.Conn.Write(p)
}

func (c *conn) Close() error {
	c.once.Do(func() { c.l.release(c.key) })
	return c.Conn.Close()
}

// NetConn is the connection accepted (a *net.UnixConn, a *tls.Conn), for
// what needs its own type: the peer's credentials of a unix socket.
func (c *conn) NetConn() net.Conn { return c.Conn }
