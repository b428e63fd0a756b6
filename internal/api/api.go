// Package api is the contract between the roam CLI and its local agent: the
// JSON types, and a client that speaks HTTP over the agent's unix socket.
// Errors travel as {"error": "..."} with an HTTP status; the one table that
// maps agent errors to statuses is package peer's (internal/agent/peer).
//
// It holds no agent logic.
package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// NodeInfo is one row of `roam nodes`: what the asked agent knows of a node.
type NodeInfo struct {
	ID        string   `json:"id"`
	Addr      string   `json:"addr"`
	Alive     bool     `json:"alive"`
	Self      bool     `json:"self,omitempty"`
	Capacity  float64  `json:"capacity"`
	Load      *float64 `json:"load"`        // nil: not in the load vector
	MemFreeMB *float64 `json:"mem_free_mb"` // nil: not in the load vector
	InfoAgeMS *int64   `json:"info_age_ms"` // age of load and memory
	// Draining: roam node drain; its jobs leave, none goes there.
	Draining bool `json:"draining,omitempty"`
	// Version is the node's roam version, as its agent gossips it.
	Version string `json:"version,omitempty"`
	// UserNS: users' jobs run in user namespaces of their own on the
	// node, where root's CRIU moves them (docs/userns.md); else in the
	// host's, where they move only if root holds CAP_SYS_RESOURCE.
	UserNS bool `json:"user_ns,omitempty"`
	// MemJobsMB is the memory the node gives its jobs' requests
	// (jobs.memory_bytes) and MemHeldMB what the requests (roam run
	// --mem) of the jobs it holds add up to; absent: not known.
	MemJobsMB float64 `json:"mem_jobs_mb,omitempty"`
	MemHeldMB float64 `json:"mem_held_mb,omitempty"`
	// Kernel and CRIU are the node's kernel release and CRIU version,
	// CPUModel its CPU's model name, CPU a few words on what its CPU
	// offers (its x86-64 level and how many of the features roam
	// compares it has) and CPUFeatures those features themselves
	// (architecture:hex, cpufeat): a job's image goes only to a node
	// whose CPU has every feature of the one the job started on. As the
	// node's metadata says them, bounded; absent: it does not say (an
	// older roam), and every job fits there.
	Kernel      string `json:"kernel,omitempty"`
	CRIU        string `json:"criu,omitempty"`
	CPUModel    string `json:"cpu_model,omitempty"`
	CPU         string `json:"cpu,omitempty"`
	CPUFeatures string `json:"cpu_features,omitempty"`
	// Slurm is the node's name in Slurm (its slurm.node), as its
	// metadata says it: which roam node a Slurm job's node list names.
	Slurm string `json:"slurm,omitempty"`
}

// Stats are the agent's counters, for `roam stats` and the tests.
type Stats struct {
	Node string `json:"node"`
	// GossipRejected counts gossip packets and streams memberlist refused:
	// they failed to decrypt (sender without the secret), or were truncated
	// or malformed.
	GossipRejected int64 `json:"gossip_rejected"`
	// LoadReceived counts load messages accepted; LoadMalformed and
	// LoadOversized the ones dropped.
	LoadReceived  int64 `json:"load_received"`
	LoadMalformed int64 `json:"load_malformed"`
	LoadOversized int64 `json:"load_oversized"`
	LoadKept      int64 `json:"load_kept"`
	LoadDiscarded int64 `json:"load_discarded"`
	LoadSent      int64 `json:"load_sent"`
	LoadBytesSent int64 `json:"load_bytes_sent"`
	// PeerRejected counts TLS connections to the peer port that failed the
	// handshake (no certificate from the cluster CA).
	PeerRejected int64 `json:"peer_rejected"`
	// ConnRefused counts connections to the roam socket or the peer port
	// closed over the connection limits (limits.connections and the like).
	ConnRefused int64 `json:"conn_refused"`
	// Migration says what migration can do on this node, as found at start.
	Migration string `json:"migration"`
}

// Error is the body of every failed request.
type Error struct {
	Error string `json:"error"`
}

// DefaultSocket is the agent's unix socket on a real node, where the CLI
// looks first.
const DefaultSocket = "/run/roam/roamd.sock"

// Client talks to one agent over its unix socket.
type Client struct {
	Socket string
	http   *http.Client
}

// NewClientDial makes a client for the agent listening on socket that
// connects with dial (asuser.DialUnix, to be another user).
func NewClientDial(socket string, dial func() (net.Conn, error)) *Client {
	tr := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return dial() }}
	return &Client{Socket: socket, http: &http.Client{Transport: tr}}
}

// NewClient makes a client for the agent listening on socket.
func NewClient(socket string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", socket)
		},
	}
	return &Client{Socket: socket, http: &http.Client{Transport: tr}}
}

// ErrNoAgent means nothing answers on the socket.
var ErrNoAgent = errors.New("no roam agent")

// Do sends a request with an optional JSON body and decodes a JSON answer
// into out (when out is not nil).
func (c *Client) Do(ctx context.Context, method, path string, in, out any) error {
	body, err := JSONBody(in)
	if err != nil {
		return err
	}
	return c.send(ctx, method, path, body, out)
}

// DoRaw posts raw bytes (a job's stdin).
func (c *Client) DoRaw(method, path string, data []byte, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return c.send(ctx, method, path, bytes.NewReader(data), out)
}

func (c *Client) send(ctx context.Context, method, path string, body io.Reader, out any) error {
	req, err := http.NewRequestWithContext(ctx, method, "http://roamd"+path, body)
	if err != nil {
		return err
	}
	err = Exchange(c.http, req, out)
	var te *TransportError
	if errors.As(err, &te) {
		return fmt.Errorf("%w at %s: %v", ErrNoAgent, c.Socket, te.Err)
	}
	return err
}

// JSONBody encodes v as a request body; nil gives no body.
// Fetch posts in (JSON) to path and copies a successful answer's body to
// w; an error answer is returned as Do returns it.
func (c *Client) Fetch(ctx context.Context, path string, in any, w io.Writer) (int64, error) {
	body, err := JSONBody(in)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://roamd"+path, body)
	if err != nil {
		return 0, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%w at %s: %v", ErrNoAgent, c.Socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return 0, Exchange(&http.Client{Transport: answered{resp}}, req, nil)
	}
	n, err := io.Copy(w, resp.Body)
	if err == nil && resp.ContentLength >= 0 && n != resp.ContentLength {
		err = fmt.Errorf("answer cut short: %d of %d bytes", n, resp.ContentLength)
	}
	return n, err
}

// Upload posts size bytes of r to path and decodes the answer into out.
func (c *Client) Upload(ctx context.Context, path string, r io.Reader, size int64, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://roamd"+path, r)
	if err != nil {
		return err
	}
	req.ContentLength = size
	err = Exchange(c.http, req, out)
	var te *TransportError
	if errors.As(err, &te) {
		return fmt.Errorf("%w at %s: %v", ErrNoAgent, c.Socket, te.Err)
	}
	return err
}

// Answered is a RoundTripper whose answer is had already: Exchange reads
// an error answer from it the one way every call reads one.
func Answered(resp *http.Response) http.RoundTripper { return answered{resp} }

type answered struct{ resp *http.Response }

func (a answered) RoundTrip(*http.Request) (*http.Response, error) { return a.resp, nil }

func JSONBody(v any) (io.Reader, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return bytes.NewReader(b), nil
}

// TransportError means the request did not get an answer at all.
type TransportError struct{ Err error }

func (e *TransportError) Error() string { return e.Err.Error() }
func (e *TransportError) Unwrap() error { return e.Err }

// Exchange sends req and decodes a JSON answer into out (when not nil). An
// error answer becomes a *RemoteError with the agent's message; no answer
// becomes a *TransportError. Used for the CLI's socket and between agents.
func Exchange(hc *http.Client, req *http.Request, out any) error {
	resp, err := hc.Do(req)
	if err != nil {
		return &TransportError{Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		var e Error
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		if json.Unmarshal(b, &e) != nil || e.Error == "" {
			e.Error = fmt.Sprintf("agent answered %s", resp.Status)
		}
		return &RemoteError{Status: resp.StatusCode, Msg: e.Error}
	}
	// The body is read to its end, so that the connection (a TLS session
	// between agents) is kept for the next request instead of closed.
	defer io.Copy(io.Discard, io.LimitReader(resp.Body, maxDrain))
	if out == nil {
		return nil
	}
	return json.NewDecoder(&boundedReader{r: resp.Body, left: MaxAnswer}).Decode(out)
}

// MaxAnswer bounds what Exchange decodes of an answer: an agent's (a
// peer's, or the CLI's own) answer past it fails the call rather than
// the caller's memory. A `roam ps` of 100,000 jobs, each's command line
// cut to a KiB, is well within it.
const MaxAnswer = 256 << 20

// ErrAnswerTooLarge is the error of an answer past MaxAnswer.
var ErrAnswerTooLarge = fmt.Errorf("the answer is larger than %d bytes", MaxAnswer)

// boundedReader reads r up to left bytes, and fails past them.
type boundedReader struct {
	r    io.Reader
	left int64
}

func (b *boundedReader) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, ErrAnswerTooLarge
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	return n, err
}

// maxDrain bounds what Exchange reads past the answer it decoded: a
// longer rest closes the connection instead.
const maxDrain = 64 << 10

// Get is Do with GET and a time-out.
func (c *Client) Get(path string, out any) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return c.Do(ctx, http.MethodGet, path, nil, out)
}

// RemoteError is an error the agent answered with.
type RemoteError struct {
	Status int
	Msg    string
}

func (e *RemoteError) Error() string { return e.Msg }

// Protocol is the version of what agents say to each other (gossip,
// load messages, the peer routes and their bodies). Agents of different
// protocols refuse each other as members (docs/deploy.md says how to
// upgrade a cluster); it changes when an agent of one version could not
// serve or call another's. 2: the peer routes migrate/out and ckpt/take
// (migrate-out and checkpoint before), and the version in the metadata.
const Protocol = 2

// Version is roam's version, set at build time (the Makefile passes
// -ldflags -X roam/internal/api.Version=...); "dev" in a plain go build.
var Version = "dev"
