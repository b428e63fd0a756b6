package peer

// The scheduling's wire: a destination's answers to a policy's move
// (MigrateAdmit, POST and DELETE), and the states a drain request asks
// for (Drain ?state=).

// AdmitAnswer is the destination's answer to a policy's move.
type AdmitAnswer struct {
	// Refused says why the destination will not take it; empty: taken.
	Refused string `json:"refused,omitempty"`
	// Load, MemFreeMB and Least are the destination's now, admitted
	// moves counted in: fresher than the source's load vector.
	Load      float64 `json:"load"`
	MemFreeMB float64 `json:"mem_free_mb"`
	Least     float64 `json:"least,omitempty"`
	// MemHeldMB is the memory its jobs' requests hold, admitted moves'
	// counted in (sched.Node.MemHeldMB).
	MemHeldMB float64 `json:"mem_held_mb,omitempty"`
}

// WithdrawAnswer is the destination's answer to a withdrawal of a move
// it admitted: whether the withdrawal ended an admission.
type WithdrawAnswer struct {
	Ended bool `json:"ended"`
}

// The states a drain request may ask for.
const (
	DrainOn    = "drain"
	DrainOff   = "resume"
	DrainLeave = "leave"
)
