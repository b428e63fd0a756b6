package agent

// The agent's counters: roam stats and the metrics.

import (
	"roam/internal/api"
	"sync/atomic"
)

// counters are the agent's statistics; atomics so memberlist's goroutines
// and the API can touch them without the lock.
type counters struct {
	gossipRejected, loadReceived, loadMalformed, loadOversized     atomic.Int64
	loadKept, loadDiscarded, loadSent, loadBytesSent, peerRejected atomic.Int64
	connRefused                                                    atomic.Int64
}

// Stats returns the agent's counters.
func (a *Agent) Stats() api.Stats {
	s := &a.stats
	return api.Stats{
		Node:           a.cfg.NodeID,
		GossipRejected: s.gossipRejected.Load(),
		LoadReceived:   s.loadReceived.Load(),
		LoadMalformed:  s.loadMalformed.Load(),
		LoadOversized:  s.loadOversized.Load(),
		LoadKept:       s.loadKept.Load(),
		LoadDiscarded:  s.loadDiscarded.Load(),
		LoadSent:       s.loadSent.Load(),
		LoadBytesSent:  s.loadBytesSent.Load(),
		PeerRejected:   s.peerRejected.Load(),
		ConnRefused:    s.connRefused.Load(),
		Migration:      a.support,
	}
}
