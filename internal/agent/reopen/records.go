package reopen

// The home's rules for a restart's record.

import (
	"fmt"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/errkind"

	"roam/internal/api"
	"roam/internal/job"
)

// StoppedToRestart is why roam ended a job `roam checkpoint --stop`
// stopped: the one end by roam that a restart undoes.
const StoppedToRestart = "stopped once checkpointed (roam checkpoint --stop); roam restart continues it"

// EndedByRoot is why a job ended that root sent signal sig (roam kill).
func EndedByRoot(sig int) string { return fmt.Sprintf("ended after root's signal %d (roam kill)", sig) }

// Revivable refuses the restart of a job that root or a limit ended:
// its record's end reason is roam's (a limit: output_bytes, its memory)
// or root's, and a restart would undo that. A job that ended by itself,
// or that its owner killed, or roam checkpoint --stop stopped, or that
// roam lost (its fence killed it, a dump of it failed, with nothing kept
// to restart it from), may be restarted.
func Revivable(r job.Record) error {
	switch r.EndReason {
	case "", StoppedToRestart, api.EndFenced, api.EndDumpFailed:
		return nil
	}
	if !r.Over() {
		return nil
	}
	return errkind.New(peer.ErrPermission, "job %s was ended by root or a limit (%s): it is not restarted", r.ID, r.EndReason)
}

// StillRuns says a record says its job runs, on a node other than lost
// (the node membership declared dead, for a home's own restart).
func StillRuns(r job.Record, lost string) bool {
	return (r.State == job.StateStarting || r.State == job.StateRunning) && (lost == "" || r.Node != lost)
}

// NewRecord is the record a checkpoint makes of its job at a home that
// has none, under id.
func NewRecord(req Request, id, self string) job.Record {
	m := req.Meta.Job
	group := m.Group
	if group == "" || id != req.ID {
		group = id
	}
	return job.Record{ID: id, UID: req.Owner.UID, GID: req.Owner.GID, Groups: req.Owner.Groups, User: m.User, Argv: m.Argv, Env: m.Env,
		Cwd: m.Cwd, Home: self, Pin: m.Pin, Started: m.Started, Group: group, CheckpointEvery: req.Every, Req: m.Req}
}

// Reopened is r as a new incarnation running on target from req's
// checkpoint.
func Reopened(r job.Record, req Request, target string, now time.Time) job.Record {
	r.Inc++
	r.State, r.Node, r.ExitCode, r.Ended, r.LostAt = job.StateRunning, target, nil, time.Time{}, time.Time{}
	r.EndReason, r.PinReason, r.OutputCut = "", "", ""
	r.Restarts = append(r.Restarts, api.Restart{Inc: r.Inc, At: now, Node: target, CheckpointAt: req.Meta.At, CheckpointNode: req.Meta.Node,
		Out: req.Meta.Out, Err: req.Meta.Err, Why: req.Why, MID: req.MID})
	if len(r.Restarts) > job.MaxMigrationLog {
		r.Restarts = r.Restarts[len(r.Restarts)-job.MaxMigrationLog:]
	}
	return r
}
