// Package relay is what a home makes of its jobs' news: the wire types
// of an update from the node a job runs on and of the home's answer, and
// Apply, the pure rule that turns an update into a record's change (where
// the job runs, a lost job back, the reason a node ended it, its exit
// once all its output is in). Package news does the I/O around it: the
// spool writes (package spool), the job table, the events.
package relay

import (
	"fmt"
	"strings"
	"time"

	"roam/internal/api"
	"roam/internal/job"
	"roam/internal/migrate"
)

// Update is one job's news from its current node to its home node.
type Update struct {
	ID string `json:"id"`
	// Node is where the job runs: the node sending the update.
	Node   string `json:"node,omitempty"`
	OutOff int64  `json:"out_off"`
	Out    []byte `json:"out,omitempty"`
	ErrOff int64  `json:"err_off"`
	Err    []byte `json:"err,omitempty"`
	// Exit, with the final sizes of both streams, once the job ended.
	Exit     *int  `json:"exit,omitempty"`
	FinalOut int64 `json:"final_out"`
	FinalErr int64 `json:"final_err"`
	// Why says why this node ended the job, when it did (a limit).
	Why string `json:"why,omitempty"`
	// Inc is the incarnation of the copy running here: news of an older
	// one than the home's record is refused, and that copy ended.
	Inc int `json:"inc,omitempty"`
	// Moves is the sequence number of the migration that brought the
	// copy here (job.Local.Moves). News sent before a move and delivered
	// after it (a request that stalled) is of a copy the home knows moved
	// on: it must not say where the job runs. News of a copy that moved
	// later than the home knows says where it runs now.
	// Absent from an older agent's update: then it is not judged.
	Moves *int `json:"moves,omitempty"`
	// Used, with Exit, is what the job used, from its cgroup here.
	Used *job.Usage `json:"used,omitempty"`
	// Fenced, with Exit: the node killed this copy because it could not
	// reach the home for fence.kill (package fence). A home that can
	// restart the job from its checkpoint does so rather than take its
	// end.
	Fenced bool `json:"fenced,omitempty"`
	// Dropped, with Exit, is how many bytes of the job's output its home
	// does not have: the home, its state disk short, took no more of it
	// (Ack.Full), so FinalOut and FinalErr are what it has, not what the
	// job wrote. The home sets it (news.takeOutput) and records the end
	// without them rather than never: a home whose disk is full of the
	// copies its nodes keep for it would take neither. Not sent.
	Dropped int64 `json:"-"`
}

// UpdateOverhead is about what an update without output takes in JSON.
const UpdateOverhead = 160

// Ack is the home node's answer to an update.
type Ack struct {
	Out  int64 `json:"out"`
	Err  int64 `json:"err"`
	Done bool  `json:"done"`
	// Gone: the home has no record of the job (a run that failed to start
	// everywhere and was taken back). Nobody can see or end it any more,
	// so its node ends it.
	Gone bool `json:"gone,omitempty"`
	// Heard: the home took the update as news of the node its record
	// says runs the job, and waits fence.kill+fence.margin from it before
	// it restarts any job of that node: the push renews the leases of
	// this home's jobs on the node (package fence). Absent from an older
	// home's answer, which does not wait: then every answer renews them.
	Heard *bool `json:"heard,omitempty"`
	// Full: the home took none of the update's output, its state disk
	// short (limits.HomeOutputShort). The node keeps the output and, for
	// a while, sends none of it (news.quietFor); once the job has ended,
	// it sends its end with the sizes of its output, which the home, if
	// still short, records with what it has (Update.Dropped).
	Full bool `json:"full,omitempty"`
}

// Renews says whether ack renews the leases of its home's jobs on the
// node that pushed (Ack.Heard).
func (k Ack) Renews() bool { return !k.Gone && (k.Heard == nil || *k.Heard) }

// Result is what Apply made of an update.
type Result struct {
	// Changed: the record changed and must be written.
	Changed bool
	// Over: the job has ended (finished or lost); its end may be acked.
	Over bool
	// Event, when set, is to be recorded once the record is written.
	Event *api.Event
	// Heard: the update came from the node the record says runs the job.
	Heard bool
	// Drop is the job's newest checkpoint, no longer needed now that it
	// finished.
	Drop *api.Checkpoint
	// Preempted: the job's node ended it as its home's queue asked
	// (job.EndPreempted), its checkpoint kept: it is pending again, and
	// its node's copy is done with.
	Preempted bool
	// Fenced: the job's node killed it by its fence, and its newest
	// checkpoint, kept elsewhere, restarts it; the record is left as it
	// is for the restart, and the node may forget its copy.
	Fenced bool
}

// Apply applies update u to rec, a copy of the home's record of the job,
// given the sizes of its output at the home after the update's was
// appended (out, errb), at now. An update from a copy older than the
// record (u.Inc < rec.Inc) is the caller's to refuse before. It applies,
// in turn, where the job runs (and whether it is back from lost), why its
// node ended it, and its exit.
func Apply(rec *job.Record, u Update, out, errb int64, now time.Time) Result {
	var r Result
	r.Event, r.Changed = applyWhere(rec, u, now)
	// Kept for the nodes jobs run on only, so it stays as small as the
	// table's list of nodes.
	r.Heard = u.Node != "" && u.Node == rec.Node
	if u.Moves != nil && *u.Moves < rec.Migrations {
		// News of a copy the job has moved on from: its output is taken
		// (by offset), but neither why it ended nor its exit. That copy
		// was dropped when the move committed; its end (137, killed by
		// its node, sent before its record there went) is not the job's,
		// which runs on where the move took it.
		r.Over = rec.Over()
		return r
	}
	if applyWhy(rec, u) {
		r.Changed = true
	}
	r.Over = rec.Over()
	if !r.Over && rec.EndReason == job.EndPreempted && rec.Preempted.IsZero() && applyExit(rec, u, out, errb, now) {
		// Pending again, with the CPU it had; its restart runs it.
		rec.State, rec.Node, rec.ExitCode, rec.Ended, rec.EndReason, rec.Preempted = job.StatePending, "", nil, time.Time{}, "", now
		r.Changed, r.Preempted = true, true
		return r
	}
	if !r.Over && u.Exit != nil && u.Fenced && restartable(rec.Newest, u.Node) {
		r.Fenced = true
		return r
	}
	if !r.Over && applyExit(rec, u, out, errb, now) {
		r.Changed, r.Over = true, true
		if u.Dropped > 0 {
			rec.OutputCut = CutText(u.Dropped)
		}
		if u.Fenced && rec.EndReason == "" {
			// Its status alone (137) does not say why, nor what brings
			// it back.
			rec.EndReason = api.EndFenced
		}
		if rec.Newest != nil {
			// Dropped where it is kept: the record names it no more, or a
			// restart of the job (roam restart of its owner's file) would
			// take it for kept, and its next loss would be restarted from
			// a file its keeper no longer has.
			c := *rec.Newest
			r.Drop, rec.Newest = &c, nil
		}
	}
	return r
}

// restartable says whether a job killed on node can be restarted from
// its newest checkpoint: one kept on another node.
func restartable(newest *api.Checkpoint, node string) bool {
	return newest != nil && newest.OK && newest.StoredOn != "" && newest.StoredOn != node
}

// applyWhere applies where the update says the job runs, and brings it
// back if it was lost (the event that says so); changed says rec changed.
func applyWhere(rec *job.Record, u Update, now time.Time) (back *api.Event, changed bool) {
	// An older agent's update names no node: the job runs where the
	// record last put it.
	node := u.Node
	if node == "" {
		node = rec.Node
	}
	switch {
	case u.Moves != nil && *u.Moves < rec.Migrations:
		// Sent before the job moved on, delivered after: its output is
		// taken (by offset), where it ran is not news.
		return nil, false
	case u.Moves != nil && *u.Moves > rec.Migrations && u.Node != "" && rec.State != job.StateFinished:
		// A move the home has no note of yet committed: the job runs
		// there now (migrate.ApplyNote's rule, from the copy itself), and
		// is back if it was lost.
		if e, ok := Revive(rec, u.Node, now); ok {
			back = &e
		}
		rec.Node, rec.Migrations = u.Node, *u.Moves
		return back, true
	case rec.State == job.StateStarting && u.Node != "" && u.Node == rec.Node:
		// Its node runs it: the start is confirmed, though the home never
		// had the answer to it (the home restarted in between).
		rec.State = job.StateRunning
		return nil, true
	default:
		if e, ok := Revive(rec, node, now); ok {
			return &e, true
		}
		return nil, false
	}
}

// applyWhy keeps the reason the job's node ended it (a limit), the first
// one only, while the job has not ended; it says whether it did.
func applyWhy(rec *job.Record, u Update) bool {
	if u.Why == "" || rec.EndReason != "" || rec.Over() {
		return false
	}
	rec.EndReason = LimitText(u.Why)
	return true
}

// applyExit records the job's exit once all its output is in at the
// home: the spool's sizes (out, errb) are the update's final ones. It
// says whether it did. The caller applies it only to a job not over yet.
func applyExit(rec *job.Record, u Update, out, errb int64, now time.Time) bool {
	if u.Exit == nil || out != u.FinalOut || errb != u.FinalErr {
		return false
	}
	code := *u.Exit
	rec.State, rec.ExitCode, rec.Ended = job.StateFinished, &code, now
	if u.Used != nil {
		rec.Used = boundUsage(*u.Used)
	}
	return true
}

// boundUsage keeps what of a job's use from the network is in range:
// NaN, a negative count or one past the bounds is taken as none.
func boundUsage(u job.Usage) job.Usage {
	ok := func(v, most float64) float64 {
		if !(v >= 0 && v <= most) {
			return 0
		}
		return v
	}
	return job.Usage{CPUSeconds: ok(u.CPUSeconds, migrate.MaxCPUBefore), PeakMB: ok(u.PeakMB, migrate.MaxPeakMB)}
}

// Revive brings a lost job back: node says it runs it. It returns the
// event that says so, when it did.
func Revive(rec *job.Record, node string, now time.Time) (api.Event, bool) {
	if rec.State != job.StateLost || node == "" {
		return api.Event{}, false
	}
	why := fmt.Sprintf("its node answers again and still runs it (lost for %v)", now.Sub(rec.LostAt).Round(time.Millisecond))
	rec.State, rec.Node, rec.LostAt = job.StateRunning, node, time.Time{}
	uid := rec.UID
	return api.Event{Kind: "back", Job: rec.ID, UID: &uid, To: node, Why: why}, true
}

// CutText says what of a job's output its home does not have: the last
// dropped bytes, which its home had no room for (Update.Dropped).
func CutText(dropped int64) string {
	return fmt.Sprintf("its last %s of output were dropped: its home's state disk was short (limits.disk_reserve_bytes)", api.Bytes(dropped))
}

// LimitText bounds a reason from the network before a record keeps it.
func LimitText(s string) string {
	if len(s) > 200 {
		s = s[:200]
	}
	return strings.ToValidUTF8(s, "?")
}
