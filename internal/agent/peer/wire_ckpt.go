package peer

import "time"

// MaxPreemptIDs bounds the jobs one PreemptRequest names: a home asks
// of each node only the running jobs of one group (a sweep) there, which
// its memory bounds to hundreds.
const MaxPreemptIDs = 1024

// PreemptRequest is CkptPreempt: of the jobs IDs, homed at Home and
// running on the node asked, preempt at most Max (package queue,
// Preempt, judged there with each job's CPU): each checkpointed, the
// file kept there, and the job ended as preempted (job.EndPreempted),
// so that its home starts it again later from that file. The jobs are
// of one group whose fresh jobs wait for room: NeedMB is the memory
// request of each, RoomMB the room the home saw on the node.
type PreemptRequest struct {
	Home   string        `json:"home"`
	IDs    []string      `json:"ids"`
	Max    int           `json:"max"`
	After  time.Duration `json:"after"`
	NeedMB float64       `json:"need_mb"`
	RoomMB float64       `json:"room_mb"`
}

// PreemptAnswer is the jobs whose preemption began.
type PreemptAnswer struct {
	IDs []string `json:"ids"`
}

// CheckpointRequest is CkptTake: save a job running on the node asked
// and answer with the file.
type CheckpointRequest struct {
	ID   string `json:"id"`
	Stop bool   `json:"stop,omitempty"`
}
