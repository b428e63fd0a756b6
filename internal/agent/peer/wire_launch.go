package peer

import (
	"time"

	"roam/internal/job"
)

// StartRequest is a home node asking a node to start jobs (Start). The
// node checks each id against Home, and HomeAddr as an address, before
// it starts anything.
type StartRequest struct {
	Home     string     `json:"home"`
	HomeAddr string     `json:"home_addr"`
	Jobs     []job.Spec `json:"jobs"`
}

// StartResult is the answer for one job of a StartRequest: the pid of
// its process and how long before the answer it started, or why it did
// not start.
type StartResult struct {
	ID    string `json:"id"`
	PID   int    `json:"pid"`
	Error string `json:"error,omitempty"`
	// Ago is how long before the answer the job started, by the node's
	// clock. The home takes the job's start as the answer's arrival less
	// Ago, within the call: a node's word moves it no further.
	Ago time.Duration `json:"ago_ns,omitempty"`
	// At is that start by the home's clock, which the home's client sets
	// (launch's startOn); never on the wire.
	At time.Time `json:"-"`
}
