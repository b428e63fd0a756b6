package connlimit

import (
	"io"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

func listen(t *testing.T, b Bounds) (*Listener, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	l := New(ln, b)
	t.Cleanup(func() { l.Close() })
	return l, path
}

// serve accepts and keeps each connection open until its client closes.
func serve(l *Listener, accepted chan<- net.Conn) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		accepted <- c
		go func() { io.Copy(io.Discard, c); c.Close() }()
	}
}

// refusedNow says whether the server closed c without a word.
func refusedNow(t *testing.T, c net.Conn) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err := c.Read(make([]byte, 1))
	return err == io.EOF
}

// Past its bound a key's connections are closed as they come (here all
// proven: they made their requests), the others' still taken; the total
// bounds every key together; a closed one gives its place back.
func TestBounds(t *testing.T) {
	var refused, refusedTotal atomic.Int64
	keys := make(chan string, 10) // the key of each dial, in order
	l, path := listen(t, Bounds{Caps: Caps{Total: 4, PerKey: 2, MakeRoom: true}, Key: func(net.Conn) string { return <-keys },
		Refused: func(_ string, total bool) {
			refused.Add(1)
			if total {
				refusedTotal.Add(1)
			}
		}})
	accepted := make(chan net.Conn, 10)
	go serve(l, accepted)
	dial := func(key string) net.Conn {
		keys <- key
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	a, b := dial("1"), dial("1")
	Prove(<-accepted)
	Prove(<-accepted)
	if c := dial("1"); !refusedNow(t, c) {
		t.Fatal("a key's third connection was taken")
	}
	if total, ofKey := l.Open("1"); total != 2 || ofKey != 2 || refused.Load() != 1 || refusedTotal.Load() != 0 {
		t.Fatalf("open %d (key 1: %d), refused %d (%d by the total)", total, ofKey, refused.Load(), refusedTotal.Load())
	}
	dial("2")
	dial("2")
	<-accepted
	<-accepted
	if c := dial("3"); !refusedNow(t, c) || refusedTotal.Load() != 1 {
		t.Fatalf("a fifth connection was taken past the total of 4 (refused by the total: %d)", refusedTotal.Load())
	}
	a.Close()
	b.Close()
	deadline := time.Now().Add(10 * time.Second)
	for total, _ := l.Open("1"); total != 2; total, _ = l.Open("1") {
		if time.Now().After(deadline) {
			t.Fatalf("closed connections still counted: %d open", total)
		}
		time.Sleep(time.Millisecond)
	}
	dial("1")
	select {
	case <-accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("a place given back is not taken again")
	}
}

// A write that cannot finish (the client reads nothing) ends within the
// write timeout, and the connection's place is given back once closed.
func TestStalledWriteEnds(t *testing.T) {
	l, path := listen(t, Bounds{Caps: Caps{Total: 1, PerKey: 1}, WriteTimeout: 200 * time.Millisecond})
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 1<<20)
		for {
			if _, err := s.Write(buf); err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			t.Fatalf("the stalled write ended with %v, want a time-out", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a write to a client that reads nothing still runs after 10 s")
	}
	s.Close()
	if total, _ := l.Open(""); total != 0 {
		t.Fatalf("%d open after the close", total)
	}
}

// A connection not proven (its first request not read) within
// FirstRequest is closed and its place given back; a proven one stays.
func TestFirstRequest(t *testing.T) {
	l, path := listen(t, Bounds{Caps: Caps{Total: 2, PerKey: 2}, FirstRequest: 200 * time.Millisecond})
	var clients, servers []net.Conn
	for range 2 {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		s, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		clients, servers = append(clients, c), append(servers, s)
	}
	Prove(servers[1])
	if !refusedNow(t, clients[0]) {
		t.Fatal("a connection never proven is still open")
	}
	time.Sleep(300 * time.Millisecond) // past FirstRequest for the proven one too
	if total, _ := l.Open(""); total != 1 {
		t.Fatalf("%d open, want the proven one alone", total)
	}
	if _, err := servers[1].Write([]byte("x")); err != nil {
		t.Fatalf("the proven connection: %v", err)
	}
	b := make([]byte, 1)
	if _, err := clients[1].Read(b); err != nil || b[0] != 'x' {
		t.Fatalf("the proven connection's client read %q, %v", b, err)
	}
}

// A key at its bound whose connections have not all made a request yet
// gets a new one in, and its oldest such is closed: the proven stay.
func TestOldestUnprovenMakesRoom(t *testing.T) {
	var refused atomic.Int64
	l, path := listen(t, Bounds{Caps: Caps{Total: 10, PerKey: 3, MakeRoom: true}, Key: func(net.Conn) string { return "k" },
		Refused: func(string, bool) { refused.Add(1) }})
	accepted := make(chan net.Conn, 10)
	go serve(l, accepted)
	var clients []net.Conn
	for i := range 3 {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		clients = append(clients, c)
		if s := <-accepted; i == 0 {
			Prove(s)
		}
	}
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	<-accepted
	if !refusedNow(t, clients[1]) {
		t.Fatal("the oldest unproven connection is still open")
	}
	if _, of := l.Open("k"); of != 3 || refused.Load() != 1 {
		t.Fatalf("%d of the key's open, %d closed over the bound; want 3, 1", of, refused.Load())
	}
	clients[0].SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := clients[0].Read(make([]byte, 1)); err == io.EOF {
		t.Fatal("the proven connection was closed")
	}
}
