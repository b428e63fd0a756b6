package api

import (
	"net/url"
	"strings"
)

// The user API's paths: what the roam CLI, and any script, asks of the
// agent on its unix socket. They live under their own versioned prefix,
// apart from the agents' own routes (/v1/peer/..., package peer), so the
// two can change apart. The agent's route table (internal/agent/routes.go)
// serves them; every caller names them here; docs/openapi.yaml describes
// each, and TestOpenAPIDescribesEveryRoute (internal/agent) holds the file
// and the table equal. A path with {id} is filled by Fill.
const (
	Prefix = "/api/v1"

	PathNodes      = "/api/v1/nodes"            // GET: what the agent knows of every node
	PathNodeDrain  = "/api/v1/nodes/{id}/drain" // POST ?state=drain|resume|leave (root)
	PathStats      = "/api/v1/stats"            // GET: the agent's counters
	PathRun        = "/api/v1/run"              // POST: start jobs
	PathJobOutput  = "/api/v1/jobs/{id}/output" // GET ?out=&err=&wait=: a job's output from offsets
	PathJobStdin   = "/api/v1/jobs/{id}/stdin"  // POST ?eof=1: bytes for a job's standard input
	PathKill       = "/api/v1/kill"             // POST: signal jobs
	PathPurge      = "/api/v1/purge"            // POST: remove ended jobs
	PathPS         = "/api/v1/ps"               // GET ?all=1: jobs
	PathSweep      = "/api/v1/sweeps/{id}"      // GET: a sweep's jobs and summary (SWEEP or SWEEP:RANGES)
	PathMigrate    = "/api/v1/migrate"          // POST: move a job
	PathCheckpoint = "/api/v1/checkpoint"       // POST: a job's checkpoint file
	PathRestart    = "/api/v1/restart"          // POST ?on=: run a checkpoint file again
	PathPolicy     = "/api/v1/policy"           // GET: every node's policy; POST: load one (root)
	PathEvents     = "/api/v1/events"           // GET ?since=: scheduling decisions
	PathWebToken   = "/api/v1/web/token"        // POST: a token for the caller's web view (roam web)

	// Metrics and the profiler keep the paths their tools expect.
	PathMetrics = "/metrics"               // GET: Prometheus text format
	PathPprof   = "/debug/pprof/{name...}" // GET: Go's profiles (root)
)

// Fill is a path of the user API with its {id} set to id, escaped.
func Fill(pattern, id string) string {
	return strings.Replace(pattern, "{id}", url.PathEscape(id), 1)
}
