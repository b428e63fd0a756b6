// Package stats is the agent's counters: what `roam stats` shows and the
// metrics count. They are atomics, so that memberlist's goroutines, the
// servers and the API touch them without a lock; it holds nothing else.
package stats

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"roam/internal/agent/gossip"
	"roam/internal/api"
)

// Counters are the agent's statistics; gossip's are package gossip's,
// which counts them.
type Counters struct {
	Gossip gossip.Counters
	// PeerRejected counts failed TLS handshakes on the peer port;
	// ConnRefused connections to either listener closed over a limit
	// (connlimit).
	PeerRejected, ConnRefused atomic.Int64
}

// Stats is `roam stats` of node, whose migration support is support.
func (c *Counters) Stats(node, support string) api.Stats {
	g := &c.Gossip
	return api.Stats{
		Node:           node,
		GossipRejected: g.Rejected.Load(),
		LoadReceived:   g.Received.Load(),
		LoadMalformed:  g.Malformed.Load(),
		LoadOversized:  g.Oversized.Load(),
		LoadKept:       g.Kept.Load(),
		LoadDiscarded:  g.Discarded.Load(),
		LoadSent:       g.Sent.Load(),
		LoadBytesSent:  g.BytesSent.Load(),
		PeerRejected:   c.PeerRejected.Load(),
		ConnRefused:    c.ConnRefused.Load(),
		Migration:      support,
	}
}

// Register puts the counters, and the node's load and free memory (MiB)
// as self reads them, into reg.
func (c *Counters) Register(reg prometheus.Registerer, self func() (load, memFreeMB float64)) {
	counter := func(name, help string, v *atomic.Int64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "roam", Name: name, Help: help,
		}, func() float64 { return float64(v.Load()) }))
	}
	g := &c.Gossip
	counter("gossip_rejected_total", "Gossip packets and streams refused (bad key, truncated, malformed).", &g.Rejected)
	counter("load_messages_received_total", "Load messages accepted.", &g.Received)
	counter("load_messages_malformed_total", "Load messages dropped as malformed.", &g.Malformed)
	counter("load_messages_oversized_total", "Load messages dropped as too large.", &g.Oversized)
	counter("load_messages_sent_total", "Load messages sent.", &g.Sent)
	counter("load_bytes_sent_total", "Bytes of load messages sent (payload).", &g.BytesSent)
	counter("peer_rejected_total", "Agent-to-agent TLS connections refused.", &c.PeerRejected)
	counter("connections_refused_total", "Connections to the roam socket or the peer port closed over a limit (limits.connections, connections_per_user, root_connections, peer_connections, peer_connections_per_address).", &c.ConnRefused)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "roam", Name: "node_load", Help: "Smoothed runnable threads per unit of capacity.",
	}, func() float64 { l, _ := self(); return l }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "roam", Name: "node_mem_free_bytes", Help: "Memory free to the node in bytes.",
	}, func() float64 { _, m := self(); return m * (1 << 20) }))
}
