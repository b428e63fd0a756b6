package peer

// The wire types of jobs' news that are not package relay's: relay's
// Update and Ack carry a job's output, exit and heartbeat, and belong
// beside Apply, the rule a home applies them by.

// PurgeRequest asks a home (Purge) to remove its ended jobs of one user,
// or of every user (All, root only: the CLI's edge checks it).
type PurgeRequest struct {
	UID uint32 `json:"uid"`
	All bool   `json:"all,omitempty"`
}
