package agent

import "roam/internal/agent/phases"

// The migration machines' drivers time their steps with package phases.
type phaseLog = phases.Log

var theirPhases = phases.Theirs
