package transport

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"

	"roam/internal/secret"
)

// A request on the peer port says which member made it: the node its
// certificate was made for. A migration's destination holds the source
// its header names to it (inbound).
func TestSenderIsTheCertificatesNode(t *testing.T) {
	s := secret.New()
	srvCfg, err := s.TLSConfig("n1")
	if err != nil {
		t.Fatal(err)
	}
	cliCfg, err := s.TLSConfig("n2")
	if err != nil {
		t.Fatal(err)
	}
	srv := TLS{Config: srvCfg, Bind: "127.0.0.1:0"}
	ln, err := srv.Listen(func(l net.Listener) net.Listener { return l })
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 1)
	hs := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got <- srv.Sender(r) })}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	cli := TLS{Config: cliCfg}
	hc := &http.Client{Transport: &http.Transport{DialTLSContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
		return cli.Dial(ctx, addr)
	}}}
	resp, err := hc.Get("https://" + ln.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if s := <-got; s != "n2" {
		t.Fatalf("sender %q, want n2", s)
	}
	if s := srv.Sender(&http.Request{}); s != "" {
		t.Fatalf("a request without TLS: sender %q", s)
	}
}
