// Package connlimit bounds what connections a listener holds: at most a
// total at once, at most so many for any one key (a user of a unix
// socket), a connection that has not made its first request within a
// short time is closed (a stranger's handshake holds a place briefly),
// and a write that does not progress within a time ends its connection
// (a client that never reads its answers holds nothing for long). A
// connection over a bound is accepted and closed at once, so the
// kernel's queue does not fill behind it and no one else waits; or, when
// its key has connections that have made no request yet and the
// listener makes room (Caps.MakeRoom), the oldest of those is closed in
// its place, so that silent connections on a key
// (a job's, on its node's address) never keep out the key's real client.
//
// It holds no policy of its own: the caller names the key of a
// connection and the bounds. It does no I/O but on the connections.
package connlimit

import (
	"container/list"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Bounds are a listener's bounds.
type Bounds struct {
	Caps
	// WriteTimeout ends a connection one of whose writes does not finish
	// within it (0: no bound).
	WriteTimeout time.Duration
	// Key names a connection's key, when it is accepted.
	Key func(net.Conn) string
	// Own, when set, gives a key a cap of its own, outside Caps (0:
	// none; Counter.Admit). It is asked outside the listener's lock.
	Own func(key string) int
	// FirstRequest closes a connection that Prove has not been called on
	// within it of its accept (0: no bound): the server proves it when
	// its first request is read (http.Server's ConnState, StateActive),
	// after the TLS handshake on a TLS port.
	FirstRequest time.Duration
	// Refused, when set, is told of each connection closed over a bound:
	// one refused, or one closed to make room (AdmittedOverOne).
	Refused func(key string, total bool)
}

// Listener is a net.Listener held to Bounds.
type Listener struct {
	net.Listener
	b  Bounds
	mu sync.Mutex // held around n and waiting alone
	n  *Counter
	// waiting are each key's connections not yet proven, oldest first:
	// the one closed to make room (AdmittedOverOne).
	waiting map[string]*list.List
}

// New holds ln to b.
func New(ln net.Listener, b Bounds) *Listener {
	if b.Key == nil {
		b.Key = func(net.Conn) string { return "" }
	}
	return &Listener{Listener: ln, b: b, n: NewCounter(b.Caps), waiting: map[string]*list.List{}}
}

// Accept returns the next connection within the bounds; those over them
// are closed as they come. With Caps.MakeRoom, one over its key's bound
// is taken when the key has a connection that has made no request yet,
// and the oldest such is closed instead (Counter.Admit).
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		key, own := l.b.Key(c), 0
		if l.b.Own != nil {
			own = l.b.Own(key)
		}
		held := &conn{Conn: c, l: l}
		l.mu.Lock()
		place, v := l.n.Admit(key, own)
		var oldest *conn
		if place != nil {
			held.place = place
			if key != "" {
				q := l.waiting[key]
				if q == nil {
					q = list.New()
					l.waiting[key] = q
				}
				if v == AdmittedOverOne {
					oldest = q.Front().Value.(*conn)
				}
				held.wait = q.PushBack(held)
			}
		}
		l.mu.Unlock()
		if place == nil {
			if l.b.Refused != nil { // before the client can see the close
				l.b.Refused(key, v == RefusedByTotal)
			}
			c.Close()
			continue
		}
		if oldest != nil { // closed over the key's bound, for the new one
			if l.b.Refused != nil {
				l.b.Refused(key, false)
			}
			oldest.Close()
		}
		if d := l.b.FirstRequest; d > 0 {
			held.late.Store(time.AfterFunc(d, func() {
				if !held.proven.Load() {
					held.Close()
				}
			}))
		}
		return held, nil
	}
}

// Open is how many connections are open, and how many of key's.
func (l *Listener) Open(key string) (total, ofKey int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.n.Open(key)
}

func (l *Listener) release(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unwait(c)
	l.n.Release(c.place)
	c.released = true
}

func (l *Listener) prove(c *conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !c.released {
		l.unwait(c)
		l.n.Prove(c.place)
	}
}

// unwait takes c off its key's waiting list; l.mu is held.
func (l *Listener) unwait(c *conn) {
	if c.wait == nil {
		return
	}
	key := c.place.key
	l.waiting[key].Remove(c.wait)
	if l.waiting[key].Len() == 0 {
		delete(l.waiting, key)
	}
	c.wait = nil
}

// conn is an accepted connection: its close gives its place back, and
// each write must finish within the bound.
type conn struct {
	net.Conn
	l        *Listener
	place    *Place
	wait     *list.Element // in l.waiting until proven or closed; under l.mu
	released bool          // its place given back; under l.mu
	once     sync.Once
	proven   atomic.Bool
	late     atomic.Pointer[time.Timer] // closes it unless proven in time
}

func (c *conn) Write(p []byte) (int, error) {
	if d := c.l.b.WriteTimeout; d > 0 {
		_ = c.Conn.SetWriteDeadline(time.Now().Add(d))
	}
	return c.Conn.Write(p)
}

func (c *conn) Close() error {
	c.once.Do(func() {
		if late := c.late.Load(); late != nil {
			late.Stop()
		}
		c.l.release(c)
	})
	return c.Conn.Close()
}

// NetConn is the connection accepted (a *net.UnixConn, a *tls.Conn), for
// what needs its own type: the peer's credentials of a unix socket.
func (c *conn) NetConn() net.Conn { return c.Conn }

// RemoteIP is a connection's key by the address it comes from (its
// host, without the port).
func RemoteIP(c net.Conn) string {
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

// Prove marks c, a connection a Listener accepted (or a TLS connection
// over one), as having made its first request: Bounds.FirstRequest no
// longer closes it. Any other connection is left alone.
func Prove(c net.Conn) {
	for {
		if held, ok := c.(*conn); ok {
			if !held.proven.Swap(true) {
				held.l.prove(held)
			}
			return
		}
		w, ok := c.(interface{ NetConn() net.Conn })
		if !ok {
			return
		}
		c = w.NetConn()
	}
}
