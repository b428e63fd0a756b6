// Package pages is the page streams between agents. An eager migration's
// dump writes the job's memory pages, as it reads them, to a page sink
// (CRIU's page server) on the destination; a lazy (post-copy)
// migration's destination fetches pages on demand from a page server the
// source's dump keeps. Either way the agents carry the bytes over the
// peer port (peer.Pages), and the checkpointer (package ckpt) talks to
// CRIU at each end.
//
// It holds no lock and no state of its own: the sinks and the lazy dumps
// are listed in the migrations in flight (package moves). It must not
// step a migration's machine: the drivers (packages outbound and
// inbound) start and end its streams as their machines decide.
package pages

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"roam/internal/agent/members"
	"roam/internal/agent/moves"
	"roam/internal/agent/peer"
	"roam/internal/ckpt"
)

// Table is what the page streams need of the migrations in flight
// (package moves' table, whatever its coming migrations' type): the lazy
// dumps serving pages and the page sinks, by migration id.
type Table interface {
	ServeLazy(mid string, d *LazyDump)
	Lazy(mid string) (*LazyDump, bool)
	EndLazy(mid string)
	OpenSink(s *moves.Sink) error
	Sink(mid string) *moves.Sink
	TakeSinkConn(mid string) net.Conn
}

// Config is what the page streams are made of.
type Config struct {
	// ImageDir is where a sink makes its migration's images directory.
	ImageDir string
	// Moves lists the sinks and the lazy dumps.
	Moves   Table
	Ckpt    ckpt.Checkpointer
	Members *members.Table
	Peers   *peer.Client
	// Dial opens a connection to a peer's port (the agent's transport);
	// it may be called from any goroutine.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	Log  *slog.Logger
}

// Streams is this node's ends of the page streams.
type Streams struct {
	imageDir string
	moves    Table
	ckpt     ckpt.Checkpointer
	members  *members.Table
	peers    *peer.Client
	dial     func(ctx context.Context, addr string) (net.Conn, error)
	log      *slog.Logger
}

// New is the node's page streams as c has them.
func New(c Config) *Streams {
	return &Streams{imageDir: c.ImageDir, moves: c.Moves, ckpt: c.Ckpt, members: c.Members, peers: c.Peers, dial: c.Dial, log: c.Log}
}

// dialStream opens a connection to a peer, asks for path and, once the
// peer answers 200, returns the connection as a byte pipe.
func (s *Streams) dialStream(addr, path string) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	remote, err := s.dial(ctx, addr)
	if err != nil {
		return nil, err
	}
	_ = remote.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(remote, "GET %s HTTP/1.1\r\nHost: roam-node\r\n\r\n", path)
	br := bufio.NewReader(remote)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		remote.Close()
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		remote.Close()
		return nil, fmt.Errorf("%s: %s", path, resp.Status)
	}
	_ = remote.SetDeadline(time.Time{})
	return &bufferedConn{Conn: remote, r: br}, nil
}

// bufferedConn reads through a bufio.Reader that may hold bytes already.
type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufferedConn) Read(p []byte) (int, error) { return b.r.Read(p) }

func (b *bufferedConn) CloseWrite() error {
	if c, ok := b.Conn.(interface{ CloseWrite() error }); ok {
		return c.CloseWrite()
	}
	return b.Conn.Close()
}
