package agent

import "roam/internal/api"

// Stats returns the agent's counters (package stats).
func (a *Agent) Stats() api.Stats { return a.stats.Stats(a.cfg.NodeID, a.support) }
