package agent

// The migration drivers are packages outbound (the source's side, a
// checkpoint's run included) and inbound (the destination's, a restart's
// run included), over the page streams of package pages; agent.go wires
// them (wireMigration). These are the names the agent's other files use
// of their wire.

import (
	"time"

	"roam/internal/agent/inbound"
	"roam/internal/agent/peer"
	"roam/internal/agent/phases"
)

const (
	stallTimeout   = peer.StallTimeout
	restoreTimeout = peer.RestoreTimeout
	migrateTimeout = peer.MigrateTimeout
)

// migrTable is the node's migrations in flight (package moves), as the
// drivers list them.
type migrTable = inbound.Table

var newMID = peer.NewMID

func msSince(t time.Time) float64 { return phases.Since(t) }
