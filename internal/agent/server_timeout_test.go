package agent

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"roam/internal/agent/httpx"
	"roam/internal/agent/limits"
	"roam/internal/agent/transport"
	"roam/internal/api"
	"roam/internal/secret"
)

// A connection to the peer port that never finishes its TLS handshake
// (here: sends nothing, then half a ClientHello) is closed by the agent's
// peer server within its header timeout; a client with the cluster's
// certificate is still served.
func TestPeerPortClosesStalledHandshakes(t *testing.T) {
	cfg, err := secret.New().TLSConfig("1")
	if err != nil {
		t.Fatal(err)
	}
	tr := transport.TLS{Config: cfg, Bind: "127.0.0.1:0"}
	ln, err := tr.Listen(func(ln net.Listener) net.Listener { return ln })
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/peer/ping", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "pong") })
	sc := limits.DefaultServer()
	sc.HeaderTimeout = 300 * time.Millisecond
	srv := httpx.PeerServer(sc, mux, log.New(io.Discard, "", 0))
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

// A request to the API socket whose body does not arrive within
// server.body_timeout (a local user sending it a byte at a time, or never) is
// ended, and the agent's goroutine with it; a body read to its end lifts
// the limit, so a long answer after it (an attached run's output) is
// neither cut nor cancelled.
func TestAPIBodyTimeout(t *testing.T) {
	readErr := make(chan error, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("POST /stall", func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		readErr <- err
		http.Error(w, "bad body", http.StatusBadRequest)
	})
	mux.HandleFunc("POST /long", func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for i := 0; i < 10; i++ { // a second, past the body's limit
			fmt.Fprintf(w, "line %d\n", i)
			http.NewResponseController(w).Flush()
			time.Sleep(100 * time.Millisecond)
		}
		if r.Context().Err() != nil {
			fmt.Fprintf(w, "cancelled\n")
			return
		}
		fmt.Fprintf(w, "done\n")
	})
	srv := httptest.NewServer(httpx.BodyWithin(300*time.Millisecond, mux))
	t.Cleanup(srv.Close)

	c, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	c.Write([]byte("POST /stall HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n1"))
	select {
	case err := <-readErr:
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			t.Fatalf("the stalled body's read ended with %v, want a timeout", err)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("ended after %v", d)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a body that never came was still awaited after 10 s")
	}

	resp, err := http.Post(srv.URL+"/long", "application/json", strings.NewReader(`{"argv":["x"]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !strings.HasSuffix(string(b), "line 9\ndone\n") {
		t.Fatalf("a long answer after the body: %q %v", b, err)
	}
}

// The roam socket holds at most limits.connections_per_user connections
// of one user, limits.connections of all users and
// limits.root_connections of root's: past them a new one is closed as it
// comes, counted, and the agent still answers; a key at its bound whose
// connections have not all made a request gets a new one in, its oldest
// silent one closed instead. Here a user (uid 70001, a real process)
// holds 3 connections that made a request each, against a bound of 3,
// which is the users' total too, and opens 2 more; root, whose cap is its
// own, still gets in, its silent connections making room for its
// requests.
func TestAPIConnectionsAreBounded(t *testing.T) {
	if _, err := os.Stat("/usr/bin/python3"); err != nil {
		t.Fatal("python3 is missing (scripts/deps.sh installs it)")
	}
	// Where uid 70001 reaches the socket: not below t.TempDir's 0700.
	dir, err := os.MkdirTemp("", "roam-conns-")
	if err != nil || os.Chmod(dir, 0o755) != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sf := filepath.Join(dir, "secret")
	if err := secret.New().WriteFile(sf); err != nil {
		t.Fatal(err)
	}
	a, _ := startAgentConfig(t, filepath.Join(dir, "state"), "a", sf, func(c *Config) {
		c.Limits.ConnectionsPerUser, c.Limits.Connections, c.Limits.RootConnections = 3, 3, 2
	})
	// Each connection: "open" if the agent holds it after a second,
	// "closed" if it closed it. The first 3 make a request each, and
	// read its answer.
	script := `import socket, sys
cs = []
for i in range(5):
    s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); s.settimeout(5.0); cs.append(s)
    if i < 3:
        s.sendall(b"GET /api/v1/nodes HTTP/1.1\r\nHost: x\r\n\r\n")
        if not s.recv(65536).startswith(b"HTTP/1.1 200"):
            print("refused"); sys.exit(1)
for s in cs:
    s.settimeout(1.0)
    try:
        print("closed" if s.recv(1) == b"" else "data")
    except socket.timeout:
        print("open")
sys.stdout.flush()
sys.stdin.read()
`
	user := exec.Command("/usr/bin/python3", "-c", script, a.cfg.Socket) // Debian's, which any user may run
	user.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 70001, Gid: 70001}}
	stdin, _ := user.StdinPipe()
	var out, errOut bytes.Buffer
	user.Stderr = &errOut
	lines := make(chan struct{})
	user.Stdout = &lineSignal{buf: &out, n: 5, done: lines}
	if err := user.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); user.Process.Kill(); user.Wait() })
	select {
	case <-lines:
	case <-time.After(time.Minute):
		t.Fatalf("the user's connections said %q (standard error %q)", out.String(), errOut.String())
	}
	if got := strings.Fields(out.String()); strings.Join(got, " ") != "open open open closed closed" {
		t.Fatalf("the user's 5 connections: %v, want the 3 that made requests held and 2 closed", got)
	}
	// Root's are outside the users' total: 2 are held; a third closes
	// the first, which sent nothing.
	var held []net.Conn
	for range 3 {
		c, err := net.Dial("unix", a.cfg.Socket)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	held[0].SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := held[0].Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("root's first silent connection, past its 2: %v, want closed", err)
	}
	waitUntil(t, 10*time.Second, "the closes counted", func() bool { return a.Stats().ConnRefused == 3 })
	// Root's request gets in the same way, while the users fill theirs.
	var ns []api.NodeInfo
	if err := api.NewClient(a.cfg.Socket).Get(api.PathNodes, &ns); err != nil || len(ns) != 1 {
		t.Fatalf("root's request past its silent connections: %v, %v", ns, err)
	}
}

// lineSignal collects output and closes done after n lines.
type lineSignal struct {
	buf  *bytes.Buffer
	n    int
	done chan struct{}
}

func (l *lineSignal) Write(p []byte) (int, error) {
	l.buf.Write(p)
	if l.done != nil && bytes.Count(l.buf.Bytes(), []byte("\n")) >= l.n {
		close(l.done)
		l.done = nil
	}
	return len(p), nil
}
