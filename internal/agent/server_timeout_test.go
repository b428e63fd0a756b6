package agent

import (
	"bytes"
	"io"
	"log"
	"net"
	"net/http"
	"testing"
	"time"

	"roam/internal/secret"
)

// A connection to the peer port that never finishes its TLS handshake
// (here: sends nothing, then half a ClientHello) is closed by the agent's
// peer server within its header timeout; a client with the cluster's
// certificate is still served.
func TestPeerPortClosesStalledHandshakes(t *testing.T) {
	old := headerTimeout
	headerTimeout = 300 * time.Millisecond
	t.Cleanup(func() { headerTimeout = old })
	cfg, err := secret.New().TLSConfig("1")
	if err != nil {
		t.Fatal(err)
	}
	tr := TLSTransport{Config: cfg, Bind: "127.0.0.1:0"}
	ln, err := tr.Listen()
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/peer/ping", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "pong") })
	srv := peerServer(mux, log.New(io.Discard, "", 0))
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })

	for _, first := range [][]byte{nil, {0x16, 0x03, 0x01, 0x02, 0x00, 0x01}} {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.Write(first)
		start := time.Now()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = c.Read(make([]byte, 1))
		c.Close()
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("a handshake that sent %d bytes was still open after 5 s", len(first))
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("closed only after %v", d)
		}
	}
	// A member still gets its answer.
	tr.Config = cfg
	conn, err := tr.Dial(t.Context(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte("GET /v1/peer/ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"))
	b, _ := io.ReadAll(conn)
	if !bytes.HasSuffix(b, []byte("pong")) {
		t.Fatalf("a member's ping: %q", b)
	}
}
