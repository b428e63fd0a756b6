package migrate

import "time"

// The protocol's timing, in one place.
const (
	// CommitWait is how long a destination holding a stopped copy waits
	// for the commit before it asks the source how the migration ended.
	CommitWait = 15 * time.Second
	// AskEvery is how often it asks again while it gets no final answer.
	AskEvery = 2 * time.Second
	// CommitTries is how often the source sends the commit before it
	// leaves it to the destination to ask; RetryEvery apart.
	CommitTries = 3
	// RetryEvery spaces the source's retries of the commit and of the
	// home node's note.
	RetryEvery = 200 * time.Millisecond
	// HomeRetry spaces the retries of the home note after the first
	// CommitTries; each retry waits twice the one before, up to
	// HomeRetryMax: a home away for hours costs a node one note per
	// migration every few minutes, not every 2 s (the job's news tells
	// the home where it runs meanwhile).
	HomeRetry    = 2 * time.Second
	HomeRetryMax = 5 * time.Minute
	// Retention keeps a settled record this long after it settled, so a
	// duplicated or late message still gets the right answer.
	Retention = 10 * time.Minute
	// MaxAge ends any record this long after the migration started,
	// settled or not: a destination that has not asked in a week is gone.
	MaxAge = 7 * 24 * time.Hour
)

// Outcome is how a migration ended, as its source decided it.
type Outcome string

const (
	Pending   Outcome = "pending"   // not decided yet
	Committed Outcome = "committed" // the destination's copy is the job
	Aborted   Outcome = "aborted"   // the source's copy is the job
	Unknown   Outcome = "unknown"   // the source has no record of it
)

// Record is a source's migration as it persists it: its decision and what
// remains to do about it. The driver stores it (bbolt in the agent) on
// every Persist action before it carries out the next one.
type Record struct {
	MID  string `json:"mid"`
	Job  string `json:"job"`
	Home string `json:"home"`
	To   string `json:"to"`
	Lazy bool   `json:"lazy,omitempty"`
	// Target is where the job goes: another node (To), or, for a
	// checkpoint, a sealed file (To is then "").
	Target Target `json:"target,omitempty"`
	// Stop (roam checkpoint --stop): the job, frozen for the checkpoint,
	// is killed once its file is delivered, and thawed when it is not.
	Stop bool `json:"stop,omitempty"`
	// PID and Tix are the source copy's root process (roam-init) and its
	// start time, to kill it after a restart.
	PID int    `json:"pid,omitempty"`
	Tix uint64 `json:"tix,omitempty"`
	// Seq is the job's number of moves once this one commits: the home
	// node keeps the note with the highest (see ApplyNote).
	Seq int `json:"seq"`
	// Inc is the incarnation of the copy that moves: a note of this
	// migration sent after an agent's restart (the job's local record
	// gone) still says which copy it was, and the home refuses the note
	// of a copy older than a restart from a checkpoint.
	Inc int `json:"inc,omitempty"`
	// Outcome is the decision; Pending until there is one.
	Outcome Outcome `json:"outcome"`
	// Killed: the source's copy is gone (committed only; for a
	// checkpoint, only with Stop).
	Killed bool `json:"killed,omitempty"`
	// Acked: the destination confirmed the commit.
	Acked bool `json:"acked,omitempty"`
	// Noted: the home node's record has this migration.
	Noted     bool      `json:"noted,omitempty"`
	Why       string    `json:"why,omitempty"`   // who asked for it
	Error     string    `json:"error,omitempty"` // why it aborted
	Started   time.Time `json:"started"`
	DecidedAt time.Time `json:"decided_at,omitzero"`
	SettledAt time.Time `json:"settled_at,omitzero"`
}

// settled says nothing remains to be done about the record.
func (r Record) settled() bool {
	switch {
	case r.Target == TargetFile && r.Outcome == Committed:
		return r.Noted && (r.Killed || !r.Stop)
	case r.Target == TargetFile && r.Outcome == Aborted:
		return r.Noted
	}
	switch r.Outcome {
	case Committed:
		return r.Killed && r.Noted && (r.Acked || r.Lazy)
	case Aborted:
		return r.Noted
	}
	return false
}

// Expired says the record may be forgotten at now (see Retention).
func Expired(r Record, now time.Time) bool {
	if now.Sub(r.Started) > MaxAge {
		return true
	}
	return r.settled() && !r.SettledAt.IsZero() && now.Sub(r.SettledAt) > Retention
}

// Answer is the source's answer to a destination that asks how migration
// mid ended, given its record (found false: none).
func Answer(r Record, found bool) Outcome {
	if !found {
		return Unknown
	}
	return r.Outcome
}

// InRecord is a destination's migration as it persists it.
type InRecord struct {
	MID   string    `json:"mid"`
	Job   string    `json:"job"`
	From  string    `json:"from"`
	State DestState `json:"state"`
	// PID is the restored copy's root process (roam-init), and Tix its
	// start time, once restored.
	PID      int       `json:"pid,omitempty"`
	Tix      uint64    `json:"tix,omitempty"`
	Started  time.Time `json:"started"`
	ReadyAt  time.Time `json:"ready_at,omitzero"`
	EndedAt  time.Time `json:"ended_at,omitzero"`
	Lazy     bool      `json:"lazy,omitempty"`
	Streamed bool      `json:"streamed,omitempty"`
	// Header is the stream's header as it came: the driver's, opaque to
	// the machine, kept to adopt the copy after a restart.
	Header []byte `json:"header,omitempty"`
	// A restart from a checkpoint file (dest_file.go) has no From: Home
	// is the job's home, which consents and commits, File the driver's
	// checkpoint file, Inc the incarnation the home gave, and Grant its
	// consent as it came (opaque, kept to adopt the copy after a
	// restart). Told: the home knows a failed restart failed.
	Restart bool   `json:"restart,omitempty"`
	Home    string `json:"home,omitempty"`
	File    string `json:"file,omitempty"`
	Inc     int    `json:"inc,omitempty"`
	Grant   []byte `json:"grant,omitempty"`
	Told    bool   `json:"told,omitempty"`
	// Resumed: the committed copy was let run (Resume carried out).
	Resumed bool `json:"resumed,omitempty"`
}

// DestExpired says a destination's record may be forgotten at now.
func DestExpired(r InRecord, now time.Time) bool {
	if now.Sub(r.Started) > MaxAge {
		return true
	}
	final := r.State == DstCommitted || r.State == DstAborted
	if r.Restart && r.State == DstAborted && !r.Told {
		final = false // the home keeps the job marked restarting until told
	}
	return final && !r.EndedAt.IsZero() && now.Sub(r.EndedAt) > Retention
}

// ApplyNote is the home node's rule for a migration's note: where the job
// runs now, given where its record says it runs (node) after seq moves. A
// committed migration moves the record only if it is newer than every one
// the record has seen: notes of two migrations of one job can arrive in
// either order, and the older must not move the record back.
func ApplyNote(node string, seq int, ok bool, to string, noteSeq int) (string, int) {
	if ok && noteSeq > seq {
		return to, noteSeq
	}
	return node, seq
}

// homeRetry is the wait before the home note's retry after try notes
// failed: HomeRetry, doubling, at most HomeRetryMax.
func homeRetry(try int) time.Duration {
	d := HomeRetry
	for i := 1; i < try && d < HomeRetryMax; i++ {
		d *= 2
	}
	return min(d, HomeRetryMax)
}
