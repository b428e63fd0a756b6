package limits

import (
	"fmt"
	"time"
)

// Server bounds what a connection may hold of the agent's servers (the
// config's server: section: the CLI's unix socket and the peer port)
// while it sends nothing. Bodies and answers have no bound but BodyTimeout: a migration's stream
// and an attached run's output are long, and their own stall guards
// watch them.
type Server struct {
	// HeaderTimeout bounds a request's TLS handshake and headers (net/http
	// times the handshake by it too).
	HeaderTimeout time.Duration `yaml:"header_timeout"`
	// FirstRequestTimeout bounds a new connection's TLS handshake and
	// first request's headers together, from its accept: a member's or a
	// local command's take milliseconds, and a stranger's connection
	// holds a place of the caps (limits.peer_connections, connections)
	// no longer than this.
	FirstRequestTimeout time.Duration `yaml:"first_request_timeout"`
	// IdleTimeout bounds a kept-alive connection between requests.
	IdleTimeout time.Duration `yaml:"idle_timeout"`
	// BodyTimeout bounds how long a request's body may take to arrive on
	// the CLI's socket. A local user who sends headers and then a body a
	// byte at a time, or never, would otherwise hold one of the agent's
	// connections and goroutines for as long as they like, and the rate
	// limit lets them open more every second. A stream that may take
	// longer (a checkpoint uploaded to roam restart) lifts it and is
	// watched for progress instead (watchedBody).
	BodyTimeout time.Duration `yaml:"body_timeout"`
	// WriteTimeout ends a connection one write of whose answer does not
	// finish within it: a client that never reads holds nothing for long.
	WriteTimeout time.Duration `yaml:"write_timeout"`
}

// Validate names the first bound out of range, by its config key.
func (s Server) Validate() (string, error) {
	for _, b := range []struct {
		key      string
		v, limit time.Duration
	}{{"server.header_timeout", s.HeaderTimeout, 10 * time.Minute}, {"server.first_request_timeout", s.FirstRequestTimeout, 10 * time.Minute},
		{"server.idle_timeout", s.IdleTimeout, time.Hour},
		{"server.body_timeout", s.BodyTimeout, time.Hour}, {"server.write_timeout", s.WriteTimeout, time.Hour}} {
		if b.v < 100*time.Millisecond || b.v > b.limit {
			return b.key, fmt.Errorf("%v is out of range (100ms to %v)", b.v, b.limit)
		}
	}
	return "", nil
}

// DefaultServer is the servers' bounds on a real node.
func DefaultServer() Server {
	return Server{HeaderTimeout: 10 * time.Second, FirstRequestTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute,
		BodyTimeout: time.Minute, WriteTimeout: time.Minute}
}
