package agent

// The harness's in-memory network: the peer port (Transport) and
// memberlist's transport of every agent, over net.Pipe, with the faults a
// test turns on: connections refused, cut part-way, their answer lost,
// delayed, stalled or replayed, and partitions between hosts. Everything
// blocks on channels, so testing/synctest's fake clock sees it idle.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// faults are the odds of each fault per connection (peer port) and per
// packet (gossip).
type faults struct {
	refuse, cut, lostReply, delay, stall, dup float64
	// maxDelay bounds a delay; a stall lasts stallMin to stallMax.
	maxDelay, stallMin, stallMax time.Duration
}

// memnet is the network of one harness.
type memnet struct {
	mu     sync.Mutex
	rng    *rand.Rand
	f      faults
	peers  map[string]*memListener // peer address -> listener
	gossip map[string]*memGossip   // gossip address -> transport
	cut    map[[2]string]bool      // partitioned host pairs
	down   map[string]bool         // hosts whose agent crashed
	conns  map[*memConn]bool
	// dupPrefix: a client connection on which a request starts with it
	// is replayed from that request on once it closes (fate "dup");
	// replies are the first lines of the replays' answers.
	dupPrefix []byte
	replies   []string
	counts    map[string]int
	stopped   bool
	// names are the nodes by host, as a certificate would name them
	// (memTransport.Sender).
	names map[string]string
}

func newMemnet(seed int64, f faults) *memnet {
	return &memnet{rng: rand.New(rand.NewSource(seed)), f: f, peers: map[string]*memListener{},
		gossip: map[string]*memGossip{}, cut: map[[2]string]bool{}, down: map[string]bool{},
		conns: map[*memConn]bool{}, counts: map[string]int{}, names: map[string]string{}}
}

func hostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}

func pair(a, b string) [2]string {
	if a > b {
		a, b = b, a
	}
	return [2]string{a, b}
}

// reachable says whether host a can talk to host b now. n.mu held.
func (n *memnet) reachable(a, b string) bool {
	return !n.stopped && !n.down[a] && !n.down[b] && !n.cut[pair(a, b)]
}

// partition cuts hosts a and b apart, and every connection between them.
func (n *memnet) partition(a, b string) {
	n.mu.Lock()
	n.cut[pair(a, b)] = true
	n.counts["partition"]++
	var kill []*memConn
	for c := range n.conns {
		if pair(c.from, c.to) == pair(a, b) {
			kill = append(kill, c)
		}
	}
	n.mu.Unlock()
	for _, c := range kill {
		c.Close()
	}
}

// heal ends every partition.
func (n *memnet) heal() {
	n.mu.Lock()
	n.cut = map[[2]string]bool{}
	n.mu.Unlock()
}

// crash takes host h off the network: its connections die, its packets
// are lost, until revive.
func (n *memnet) crash(h string) {
	n.mu.Lock()
	n.down[h] = true
	var kill []*memConn
	for c := range n.conns {
		if c.from == h || c.to == h {
			kill = append(kill, c)
		}
	}
	n.mu.Unlock()
	for _, c := range kill {
		c.Close()
	}
}

func (n *memnet) revive(h string) {
	n.mu.Lock()
	delete(n.down, h)
	n.mu.Unlock()
}

func (n *memnet) count(what string) {
	n.mu.Lock()
	n.counts[what]++
	n.mu.Unlock()
}

// fate draws what happens to a new connection. n.mu held.
func (n *memnet) fate() (string, time.Duration, int) {
	x := n.rng.Float64()
	f := n.f
	for _, c := range []struct {
		name string
		p    float64
	}{{"refuse", f.refuse}, {"cut", f.cut}, {"lost-reply", f.lostReply}, {"delay", f.delay}, {"stall", f.stall}, {"dup", f.dup}} {
		if x < c.p {
			var d time.Duration
			switch c.name {
			case "delay":
				d = time.Duration(n.rng.Int63n(int64(f.maxDelay) + 1))
			case "stall":
				d = f.stallMin + time.Duration(n.rng.Int63n(int64(f.stallMax-f.stallMin)+1))
			}
			return c.name, d, n.rng.Intn(2048)
		}
		x -= c.p
	}
	return "", 0, 0
}

// transport is host's peer port on the network.
func (n *memnet) transport(host string) *memTransport { return &memTransport{n: n, host: host} }

type memTransport struct {
	n    *memnet
	host string
}

func (t *memTransport) Listen(hold func(net.Listener) net.Listener) (net.Listener, error) {
	addr := net.JoinHostPort(t.host, "7947")
	ln := &memListener{addr: addr, accept: make(chan net.Conn), done: make(chan struct{})}
	t.n.mu.Lock()
	t.n.peers[addr] = ln
	t.n.mu.Unlock()
	return hold(ln), nil
}

// Sender is the node at the host the request came from, as the real
// transport's is the node its certificate names.
func (t *memTransport) Sender(r *http.Request) string {
	t.n.mu.Lock()
	defer t.n.mu.Unlock()
	return t.n.names[hostOf(r.RemoteAddr)]
}

func (t *memTransport) Dial(ctx context.Context, addr string) (net.Conn, error) {
	n := t.n
	to := hostOf(addr)
	n.mu.Lock()
	ln := n.peers[addr]
	if !n.reachable(t.host, to) {
		n.mu.Unlock()
		return nil, fmt.Errorf("dial %s: no route to host", addr)
	}
	if ln == nil {
		n.mu.Unlock()
		return nil, fmt.Errorf("dial %s: connection refused", addr)
	}
	fate, d, k := n.fate()
	n.counts["conn"]++
	if fate != "" {
		n.counts[fate]++
	}
	n.mu.Unlock()
	if fate == "refuse" {
		return nil, fmt.Errorf("dial %s: connection reset (fault)", addr)
	}
	client, server := n.newConn(t.host, to, fate, d, k)
	select {
	case ln.accept <- server:
		return client, nil
	case <-ln.done:
	case <-ctx.Done():
	}
	client.Close()
	return nil, fmt.Errorf("dial %s: connection refused", addr)
}

// memListener is a peer port.
type memListener struct {
	addr   string
	accept chan net.Conn
	done   chan struct{}
	once   sync.Once
}

func (l *memListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.accept:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *memListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *memListener) Addr() net.Addr { return memAddr(l.addr) }

type memAddr string

func (a memAddr) Network() string { return "mem" }
func (a memAddr) String() string  { return string(a) }

// memConn is one end of a connection, with its fault.
type memConn struct {
	net.Conn
	n        *memnet
	peer     *memConn
	from, to string
	client   bool
	fate     string
	d        time.Duration
	k        int // bytes the client sends before a cut or a stall
	link     *link
	mu       sync.Mutex
	sent     int
	replay   []byte // what the client sent, for a "dup" connection
	stalled  bool
}

// link is what both ends of a connection share.
type link struct {
	done chan struct{}
	once sync.Once
}

// newConn makes a connection from host from to host to, registered so a
// partition or a crash can cut it.
func (n *memnet) newConn(from, to, fate string, d time.Duration, k int) (client, server *memConn) {
	c, s := net.Pipe()
	l := &link{done: make(chan struct{})}
	client = &memConn{Conn: c, n: n, from: from, to: to, fate: fate, d: d, k: k, client: true, link: l}
	server = &memConn{Conn: s, n: n, from: from, to: to, fate: fate, d: d, k: k, link: l}
	client.peer, server.peer = server, client
	n.mu.Lock()
	n.conns[client], n.conns[server] = true, true
	n.mu.Unlock()
	return client, server
}

// RemoteAddr is the other end's host (and a port of no meaning), which
// the peer port's limits count by.
func (c *memConn) RemoteAddr() net.Addr {
	if c.client {
		return memAddr(net.JoinHostPort(c.to, "7947"))
	}
	return memAddr(net.JoinHostPort(c.from, "1"))
}

func (c *memConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	if c.client && c.fate == "" && c.sent > 0 && (bytes.HasPrefix(b, []byte("GET ")) || bytes.HasPrefix(b, []byte("POST "))) {
		// The next request on a connection the agents kept meets a
		// fault as often as one on a new connection.
		c.n.mu.Lock()
		f, d, k := c.n.fate()
		c.n.counts["request"]++
		if f == "refuse" {
			f, k = "cut", 0
		}
		if f != "" {
			c.n.counts[f]++
		}
		c.n.mu.Unlock()
		if f != "" {
			c.fate, c.d, c.k = f, d, c.sent+k
			c.peer.mu.Lock()
			c.peer.fate, c.peer.d, c.peer.k = f, d, c.k
			c.peer.mu.Unlock()
		}
	}
	if c.client && c.fate == "" {
		c.n.mu.Lock()
		if len(c.n.dupPrefix) > 0 && bytes.HasPrefix(b, c.n.dupPrefix) {
			c.fate = "dup"
		}
		c.n.mu.Unlock()
	}
	fate, sent := c.fate, c.sent
	c.sent += len(b)
	if fate == "dup" && c.client && len(c.replay) < 1<<16 {
		c.replay = append(c.replay, b...)
	}
	c.mu.Unlock()
	switch {
	case fate == "delay":
		time.Sleep(c.d)
	case fate == "cut" && c.client && sent+len(b) > c.k:
		c.Close()
		return 0, io.ErrClosedPipe
	case fate == "lost-reply" && !c.client:
		// The request was served; its answer never arrives.
		c.Close()
		return 0, io.ErrClosedPipe
	case fate == "stall" && c.client && sent+len(b) > c.k && !c.stalled:
		c.stalled = true
		select {
		case <-time.After(c.d):
		case <-c.link.done:
			return 0, io.ErrClosedPipe
		}
	}
	return c.Conn.Write(b)
}

func (c *memConn) Close() error {
	c.link.once.Do(func() {
		c.n.mu.Lock()
		delete(c.n.conns, c)
		delete(c.n.conns, c.peer)
		c.n.mu.Unlock()
		close(c.link.done)
		c.Conn.Close()
		c.peer.Conn.Close()
		cl := c
		if !c.client {
			cl = c.peer
		}
		cl.mu.Lock()
		replay := cl.replay
		cl.mu.Unlock()
		if cl.fate == "dup" {
			go c.n.replay(cl.from, net.JoinHostPort(cl.to, "7947"), replay)
		}
	})
	return nil
}

// CloseWrite: a pipe cannot half-close, so it closes.
func (c *memConn) CloseWrite() error { return c.Close() }

// replay sends what a client sent once more on a new connection, and
// reads the answers away: a duplicated message.
func (n *memnet) replay(from, addr string, b []byte) {
	if len(b) == 0 {
		return
	}
	n.mu.Lock()
	ln := n.peers[addr]
	ok := ln != nil && n.reachable(from, hostOf(addr))
	n.mu.Unlock()
	if !ok {
		return
	}
	c, s := net.Pipe()
	select {
	case ln.accept <- s:
	case <-ln.done:
		c.Close()
		return
	case <-time.After(time.Second):
		c.Close()
		return
	}
	n.count("replayed")
	go func() {
		_, _ = c.Write(b)
	}()
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	first, _ := br.ReadString('\n')
	n.mu.Lock()
	n.replies = append(n.replies, strings.TrimSpace(first))
	n.mu.Unlock()
	_, _ = io.Copy(io.Discard, br)
	c.Close()
}

// memGossip is memberlist's transport of one host.
type memGossip struct {
	n       *memnet
	host    string
	addr    string
	packets chan *memberlist.Packet
	streams chan net.Conn
	done    chan struct{}
	once    sync.Once
}

var _ memberlist.NodeAwareTransport = (*memGossip)(nil)

func (n *memnet) gossipTransport(host string) *memGossip {
	g := &memGossip{n: n, host: host, addr: net.JoinHostPort(host, "7946"),
		packets: make(chan *memberlist.Packet, 256), streams: make(chan net.Conn), done: make(chan struct{})}
	n.mu.Lock()
	n.gossip[g.addr] = g
	n.mu.Unlock()
	return g
}

func (g *memGossip) FinalAdvertiseAddr(string, int) (net.IP, int, error) {
	return net.ParseIP(g.host), 7946, nil
}

func (g *memGossip) WriteTo(b []byte, addr string) (time.Time, error) {
	n := g.n
	n.mu.Lock()
	dst := n.gossip[addr]
	ok := dst != nil && n.reachable(g.host, hostOf(addr))
	n.mu.Unlock()
	if ok {
		select {
		case dst.packets <- &memberlist.Packet{Buf: append([]byte(nil), b...), From: memAddr(g.addr), Timestamp: time.Now()}:
		case <-dst.done:
		default: // a full queue drops, as UDP does
		}
	}
	return time.Now(), nil
}

func (g *memGossip) PacketCh() <-chan *memberlist.Packet { return g.packets }

func (g *memGossip) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	n := g.n
	n.mu.Lock()
	dst := n.gossip[addr]
	ok := dst != nil && n.reachable(g.host, hostOf(addr))
	n.mu.Unlock()
	if !ok {
		return nil, fmt.Errorf("dial %s: no route to host", addr)
	}
	mc, ms := n.newConn(g.host, hostOf(addr), "", 0, 0)
	select {
	case dst.streams <- ms:
		return mc, nil
	case <-dst.done:
	case <-time.After(timeout):
	}
	mc.Close()
	return nil, errors.New("dial " + addr + ": timeout")
}

func (g *memGossip) StreamCh() <-chan net.Conn { return g.streams }

func (g *memGossip) Shutdown() error {
	g.once.Do(func() {
		close(g.done)
		g.n.mu.Lock()
		if g.n.gossip[g.addr] == g {
			delete(g.n.gossip, g.addr)
		}
		g.n.mu.Unlock()
	})
	return nil
}

func (g *memGossip) WriteToAddress(b []byte, a memberlist.Address) (time.Time, error) {
	return g.WriteTo(b, a.Addr)
}

func (g *memGossip) DialAddressTimeout(a memberlist.Address, timeout time.Duration) (net.Conn, error) {
	return g.DialTimeout(a.Addr, timeout)
}
