package agent

import (
	"time"

	"roam/internal/agent/config"
)

// Config is roamd's config file (package config).
type Config = config.Config

// Tunables of the agent, named once.
const (
	// probesPerInterval is how many CPU samples are taken per load interval.
	probesPerInterval = 4
	// loadTau is the time constant of the smoothed CPU load, in load
	// intervals: one hides a single sample's noise (four samples an
	// interval) yet shows a migration within a second or two, which the
	// balancing policies need to see their own moves.
	loadTauIntervals = 1
	// suspicionMult and suspicionMaxMult set memberlist's failure detection:
	// a dead node is declared after 3 to 6 probe intervals of suspicion
	// (memberlist's LAN defaults are 4 and 6, up to 24 s; the foundation
	// issue asks for under 10 s).
	suspicionMult    = 3
	suspicionMaxMult = 2
	// joinRetry is how often an agent that has no peer retries its join list.
	joinRetry = 2 * time.Second
	// pushPullInterval is how often memberlist syncs its whole state with
	// a random member (LAN default 30 s). A node cut off for less time
	// than its own failure detection needs still lists its peers when its
	// link comes back, so it does not join again; the others have
	// declared it dead and gossip no more to it. A push-pull is what tells
	// it so and lets it refute: measured on an emulated cluster, a node
	// came back after 48 s with the default and 0.4 s when it happened to
	// be alone. State is a few hundred bytes a node.
	pushPullInterval = 10 * time.Second
	// pushEvery is how often a node looks for new output of its jobs.
	pushEvery = 50 * time.Millisecond
	// pushChunk bounds the bytes of one stream of one job in one push.
	pushChunk = 256 << 10
	// outputChunk bounds one answer to `roam run`'s output poll.
	outputChunk = 1 << 20
	// maxWait bounds an output long-poll.
	maxWait = 10 * time.Second
)
