package agent

// The agent's parts: every edge where it meets the world, as interfaces it is given.
// cmd/roamd builds the real ones; the in-process harness (harness_test.go) builds
// in-memory ones. Time is not among them: the agent reads the time package, which
// the harness fakes for all its goroutines (testing/synctest), net/http's and bbolt's too.

import (
	"context"
	"net"
	"net/http"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"

	"roam/internal/agent/launch"
	"roam/internal/ckpt"
	"roam/internal/cpufeat"
	"roam/internal/job"
)

// Parts are what New needs beside the config.
type Parts struct {
	// API is the listener of the CLI's requests (ListenAPI: the unix
	// socket, whose peer credentials say who calls).
	API net.Listener
	// Transport carries the calls and streams between agents.
	Transport Transport
	// Gossip is memberlist's transport; nil is memberlist's own UDP and
	// TCP on bind_addr:gossip_port.
	Gossip memberlist.Transport
	// GossipKey encrypts and authenticates gossip (secret.GossipKey).
	GossipKey []byte
	// CheckpointKey seals checkpoint files (secret.CheckpointKey); nil
	// derives one from GossipKey.
	CheckpointKey []byte
	// Checkpointer freezes, dumps and restores jobs.
	Checkpointer ckpt.Checkpointer
	// Processes starts, signals and measures jobs.
	Processes job.Processes
	// UserNS: users' jobs run in user namespaces of their own here
	// (job.Launcher.UserNS); the node says so to the others.
	UserNS bool
	// LazyUserNS: this node's CRIU restores a job lazily inside the job's
	// own user namespace (ckpt.LazyInUserNS); the node says so to the
	// others, which move such jobs here eagerly otherwise.
	LazyUserNS bool
	// Host is this node's CPU, kernel and CRIU, read at start and told
	// the others (cpufeat; the zero Host says nothing: every job fits).
	Host cpufeat.Host
	// Prober measures the node's load and free memory.
	Prober Prober
	Slurm  launch.SlurmAsk                                      // asks after a run's Slurm job; nil: no run names one here
	KeepOn func(id, running, home string, live []string) string // checkpoints.Config.StoreFor
	// JobMemory is the memory, in bytes, this node has for its jobs
	// (probe.Node.JobMemory), which the config's jobs.memory_bytes
	// replaces when it names one: the node takes a job only while the
	// memory requests of the jobs it holds and this one fit in it. 0: it
	// counts none, and takes any.
	JobMemory int64
	// Registry gets the metrics /metrics serves; nil: a fresh one (never the global default).
	Registry *prometheus.Registry
	// DiskFree is what the disk holding dir has free, in bytes (-1:
	// unknown); nil: spool.Free, the file system's own count.
	DiskFree func(dir string) int64
	// Routes, when set, adds routes to the CLI's socket (roamd's web view
	// tokens); uid tells a request's caller (SO_PEERCRED).
	Routes func(mux *http.ServeMux, uid func(*http.Request) (uint32, bool))
}

// Prober measures the node (probe.Node for real).
type Prober interface {
	// Runnable is how many threads are runnable on the node now, the
	// processes in skip (the jobs' roam-init, pid to start time) left out.
	Runnable(skip map[int]uint64) int
	// MemFreeMB is the memory free to the node.
	MemFreeMB() float64
}

// Transport is the peer port: it listens for other agents and dials them,
// every connection authenticated both ways (mutual TLS for real).
type Transport interface {
	// Listen opens the peer port; hold, which the agent gives, bounds the
	// connections it accepts, beneath any handshake.
	Listen(hold func(net.Listener) net.Listener) (net.Listener, error)
	Dial(ctx context.Context, addr string) (net.Conn, error)
	Sender(r *http.Request) string // the member that made r (its certificate's node), or ""
}
