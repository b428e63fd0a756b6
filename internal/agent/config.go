package agent

import (
	"roam/internal/agent/config"
)

// Config is roamd's config file (package config).
type Config = config.Config

// Tunables of the agent, named once.
const (
	// loadTau is the time constant of the smoothed CPU load, in load
	// intervals: one hides a single sample's noise (four samples an
	// interval) yet shows a migration within a second or two, which the
	// balancing policies need to see their own moves.
	loadTauIntervals = 1
)
