package agent

// The agent's counters: roam stats and the metrics.

import (
	"roam/internal/agent/gossip"
	"roam/internal/api"
	"sync/atomic"
)

// counters are the agent's statistics; atomics so memberlist's goroutines
// and the API can touch them without the lock. gossip's are package
// gossip's, which counts them.
type counters struct {
	gossip                    gossip.Counters
	peerRejected, connRefused atomic.Int64
}

// Stats returns the agent's counters.
func (a *Agent) Stats() api.Stats {
	s, g := &a.stats, &a.stats.gossip
	return api.Stats{
		Node:           a.cfg.NodeID,
		GossipRejected: g.Rejected.Load(),
		LoadReceived:   g.Received.Load(),
		LoadMalformed:  g.Malformed.Load(),
		LoadOversized:  g.Oversized.Load(),
		LoadKept:       g.Kept.Load(),
		LoadDiscarded:  g.Discarded.Load(),
		LoadSent:       g.Sent.Load(),
		LoadBytesSent:  g.BytesSent.Load(),
		PeerRejected:   s.peerRejected.Load(),
		ConnRefused:    s.connRefused.Load(),
		Migration:      a.support,
	}
}
