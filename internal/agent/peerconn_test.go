package agent

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/agent/peer"
)

// The peer port holds at most limits.peer_connections_per_address
// connections from one address and limits.peer_connections of all
// strangers: a host that opens more has the rest closed as they come,
// before anything is read of them, and counted; those within the caps
// are served, and so are the members, whose addresses have places of
// their own outside the strangers' total, and whose new connections
// close silent ones of their address (a job's on that node) to get in; a
// place given back is taken again.
func TestAgentsPeerPortHoldsConnectionsToItsCaps(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 45, faults{}, "static", func(cfg *Config) {
			cfg.Limits.PeerConnectionsPerAddress, cfg.Limits.PeerConnections = 8, 20
		})
		n1 := c.nodes[0]
		addr := net.JoinHostPort(n1.host, "7947")
		// served says whether the connection answers a request, and
		// closes it.
		served := func(conn net.Conn) bool {
			defer conn.Close()
			if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: n1\r\n\r\n", peer.Ping); err != nil {
				return false
			}
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				return false
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.StatusCode == http.StatusOK
		}
		dial := func(host string, n int) []net.Conn {
			var cs []net.Conn
			for range n {
				conn, err := c.net.transport(host).Dial(t.Context(), addr)
				if err != nil {
					t.Fatal(err)
				}
				cs = append(cs, conn)
			}
			return cs
		}
		before := n1.a.Stats().ConnRefused
		// Three strangers' 30 each, all silent: 8 of each address held
		// (each new one closing the oldest), to a total of 20 (past which
		// new ones are closed at once).
		evil := dial("198.18.40.9", 30)
		more := append(dial("198.18.40.10", 30), dial("198.18.40.11", 30)...)
		synctest.Wait()
		if got := n1.a.Stats().ConnRefused - before; got != 22+22+26 {
			t.Fatalf("refused %d of three addresses' 30 connections each, want 70 (8 per address, 20 in all)", got)
		}
		// The members are served from their own addresses, whose places
		// are their own.
		for _, h := range c.nodes[1:] {
			if err := h.a.peers.Call("n1", http.MethodGet, peer.Ping, nil, nil); err != nil {
				t.Fatalf("%s's call to n1 while strangers hold all 20: %v", h.name, err)
			}
		}
		for i, conn := range evil {
			if ok := served(conn); ok != (i >= 22) {
				t.Fatalf("the first stranger's connection %d served: %v (its last 8)", i, ok)
			}
		}
		// A process on a member's own address (a job on n2) fills that
		// address's 8 with silent connections: n2's agent still gets a
		// new one in, in place of the oldest of them.
		squat := dial(c.nodes[1].host, 8)
		synctest.Wait()
		c.nodes[1].a.peers.HTTP.CloseIdleConnections()
		if err := c.nodes[1].a.peers.Call("n1", http.MethodGet, peer.Ping, nil, nil); err != nil {
			t.Fatalf("n2's call to n1 while a process on its address holds its 8: %v", err)
		}
		for _, conn := range squat {
			conn.Close()
		}
		for _, conn := range more {
			conn.Close()
		}
		// Their places given back, the host is served again.
		c.waitFor("the places given back", time.Minute, func() bool {
			_, of := n1.a.peerHeld.Open("198.18.40.9")
			return of == 0
		})
		if !served(dial("198.18.40.9", 1)[0]) {
			t.Fatal("a host whose connections closed is not served again")
		}
		// A stranger who sends nothing holds its places no longer than
		// server.first_request_timeout (5 s), before the header timeout
		// (10 s) would end them; a member's kept-alive connection stays.
		idle := dial("198.18.40.9", 8)
		synctest.Wait()
		time.Sleep(n1.cfg.Server.FirstRequestTimeout + time.Second)
		if _, of := n1.a.peerHeld.Open("198.18.40.9"); of != 0 {
			t.Fatalf("%d of a stranger's silent connections held %v after their accept", of, n1.cfg.Server.FirstRequestTimeout+time.Second)
		}
		if _, of := n1.a.peerHeld.Open(c.nodes[1].host); of == 0 {
			t.Fatal("n2 holds no kept-alive connection to n1")
		}
		for _, conn := range idle {
			conn.Close()
		}
	})
}
