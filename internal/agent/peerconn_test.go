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
// connections from one address and limits.peer_connections in all: a
// host that opens more has the rest closed as they come, before anything
// is read of them, and counted; those within the caps are served, and so
// are the other members, from their own addresses; a place given back is
// taken again.
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
		// One host's 30: 8 held, the rest closed at once.
		evil := dial("198.18.40.9", 30)
		synctest.Wait()
		if got := n1.a.Stats().ConnRefused - before; got != 22 {
			t.Fatalf("refused %d of one address's 30 connections, want 22 (8 per address)", got)
		}
		// The other members are served from their own addresses.
		for _, h := range c.nodes[1:] {
			if err := h.a.peers.Call("n1", http.MethodGet, peer.Ping, nil, nil); err != nil {
				t.Fatalf("%s's call to n1 while a host holds its 8: %v", h.name, err)
			}
		}
		// Another host's reach the total: the first 20 less what is open.
		total, _ := n1.a.peerHeld.Open("")
		more := dial("198.18.40.10", 8)
		synctest.Wait()
		want := 20 - total
		refused := n1.a.Stats().ConnRefused - before - 22
		if int(refused) != 8-min(want, 8) {
			t.Fatalf("with %d open of 20, a second host's 8: %d refused, want %d", total, refused, 8-min(want, 8))
		}
		for i, conn := range evil {
			if ok := served(conn); ok != (i < 8) {
				t.Fatalf("the first host's connection %d served: %v (8 per address)", i, ok)
			}
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
	})
}
