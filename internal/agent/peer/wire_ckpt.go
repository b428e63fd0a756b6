package peer

// CheckpointRequest is CkptTake: save a job running on the node asked
// and answer with the file.
type CheckpointRequest struct {
	ID   string `json:"id"`
	Stop bool   `json:"stop,omitempty"`
}
