// Package phases is where a migration's time goes: each node times the
// actions it carries out for its machine (a Log), and the destination
// sends its own back with its answers, so the source's log has every step
// in the order it ran. Metrics counts the migrations and checkpoints a
// node made, with their steps, for Prometheus. It does no I/O but the
// metrics' registration, and holds no lock: a Log belongs to one
// migration's goroutine.
package phases

import (
	"time"

	"roam/internal/api"
	"roam/internal/ckpt"
)

// Log is one node's steps of one migration.
type Log struct {
	// Side is the node's part in the migration (api.SideSource, SideDest).
	Side string
	// Frozen: the job is stopped from the last step on (until the other
	// node resumes it, or this one thaws it).
	Frozen bool
	// List is the steps, in the order they ran.
	List []api.Phase
}

// Since is the time since t in milliseconds, to the microsecond: the
// unit of every step and time a migration reports.
func Since(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

// Add records a step that took since start.
func (l *Log) Add(name string, start time.Time) {
	l.List = append(l.List, api.Phase{Side: l.Side, Name: name, MS: Since(start), Frozen: l.Frozen})
}

// AddTimes records a CRIU call's parts: those CRIU says the job was
// stopped in start the freeze. all: the job was stopped throughout.
func (l *Log) AddTimes(t ckpt.Times, all bool) {
	for _, p := range t {
		p.Side = l.Side
		if p.Frozen {
			l.Frozen = true
		}
		p.Frozen = p.Frozen || all || l.Frozen
		l.List = append(l.List, p)
	}
}

// AddCall records a call to the other node that took since start: its
// own part (the network, TLS, encoding) is the time the other node's
// steps, theirs, do not account for; theirs follow it.
func (l *Log) AddCall(name string, start time.Time, theirs []api.Phase) {
	own := Since(start)
	for _, p := range theirs {
		own -= p.MS
	}
	l.List = append(l.List, api.Phase{Side: l.Side, Name: name, MS: max(own, 0), Frozen: l.Frozen})
	for _, p := range theirs {
		// The other node's step is frozen if it says so (a step after
		// its resume is not) and the job was stopped here.
		p.Frozen = p.Frozen && l.Frozen
		l.List = append(l.List, p)
	}
}

// FrozenMS is the time of the steps the job was stopped in.
func (l *Log) FrozenMS() float64 { return ckpt.Times(l.List).Sum(true) }

// maxTheirs bounds the steps a node takes from the other's answer.
const maxTheirs = 32

// destSteps are the names a destination gives its steps; another name
// from a peer (a newer roam's) is taken as "other", so that the metrics'
// labels stay a known set.
var destSteps = map[string]bool{
	"persist": true, "receive": true, "lazy-pages daemon": true, "job cgroup": true,
	"criu start": true, "criu setup": true, "criu fork": true, "criu restore": true,
	"timerfds": true, "cpu cgroup": true, "check creds": true, "check files": true, "adopt": true,
	"resume": true, "discard": true,
}

// Theirs are the steps the other node sent, as that node's side; past
// maxTheirs, or with a time out of range, none is taken.
func Theirs(ps []api.Phase, side string) []api.Phase {
	if len(ps) > maxTheirs {
		return nil
	}
	out := make([]api.Phase, 0, len(ps))
	for _, p := range ps {
		if !(p.MS >= 0 && p.MS < 1e9) {
			return nil
		}
		if !destSteps[p.Name] {
			p.Name = "other"
		}
		p.Side = side
		out = append(out, p)
	}
	return out
}
