package peer

import "roam/internal/job"

// SignalRequest is a signal for a job running on the node asked (Signal).
type SignalRequest struct {
	ID     string `json:"id"`
	Signal int    `json:"signal"`
	// ByRoot says root sends it to another user's job: a job that ends
	// after it is not restarted (its record's end_reason says so).
	ByRoot bool `json:"by_root,omitempty"`
}

// PSPart is one node's part of `roam ps` (PS): the records of the jobs
// whose home it is, and the use of the jobs running on it.
type PSPart struct {
	Records []job.Record        `json:"records"`
	Usage   map[string]JobUsage `json:"usage"`
	// Waiting says why the node's pending home jobs wait, by sweep id
	// or lone job id, as its queue's last round said.
	Waiting map[string]string `json:"waiting,omitempty"`
	// Cut are the records whose argv is cut to what ps lists
	// (job.PSArgv): the whole is in the record at the home (Record).
	Cut []string `json:"cut,omitempty"`
}

// JobUsage is a running job's resource use on its node.
type JobUsage struct {
	CPUSeconds float64 `json:"cpu_s"`
	RSSMB      float64 `json:"rss_mb"`
	// Stopped: the job's program is stopped (SIGSTOP, ^Z).
	Stopped bool `json:"stopped,omitempty"`
}

// CancelRequest ends jobs homed on the node asked before they start
// (Cancel): those still pending end as Signal would have ended them,
// those started meanwhile are sent it.
type CancelRequest struct {
	IDs    []string `json:"ids"`
	Signal int      `json:"signal"`
}

// MaxCancel bounds a CancelRequest's jobs.
const MaxCancel = 1 << 20
