package peer

import "roam/internal/job"

// StartRequest is a home node asking a node to start jobs (Start). The
// node checks each id against Home, and HomeAddr as an address, before
// it starts anything.
type StartRequest struct {
	Home     string     `json:"home"`
	HomeAddr string     `json:"home_addr"`
	Jobs     []job.Spec `json:"jobs"`
}

// StartResult is the answer for one job of a StartRequest: the pid of
// its process, or why it did not start.
type StartResult struct {
	ID    string `json:"id"`
	PID   int    `json:"pid"`
	Error string `json:"error,omitempty"`
}
