package agent

// Where a migration's time goes: each node times the actions it carries
// out for its machine, and the destination sends its own back with its
// answers, so the source's log has every step in the order it ran.

import (
	"time"

	"roam/internal/api"
	"roam/internal/ckpt"
)

// phaseLog is one node's steps of one migration.
type phaseLog struct {
	side string
	// frozen: the job is stopped from the last step on (until the other
	// node resumes it, or this one thaws it).
	frozen bool
	list   []api.Phase
}

// add records a step that took since start.
func (l *phaseLog) add(name string, start time.Time) {
	l.list = append(l.list, api.Phase{Side: l.side, Name: name, MS: msSince(start), Frozen: l.frozen})
}

// addTimes records a CRIU call's parts: those CRIU says the job was
// stopped in start the freeze. all: the job was stopped throughout.
func (l *phaseLog) addTimes(t ckpt.Times, all bool) {
	for _, p := range t {
		p.Side = l.side
		if p.Frozen {
			l.frozen = true
		}
		p.Frozen = p.Frozen || all || l.frozen
		l.list = append(l.list, p)
	}
}

// addCall records a call to the other node that took since start: its
// own part (the network, TLS, encoding) is the time the other node's
// steps, theirs, do not account for; theirs follow it.
func (l *phaseLog) addCall(name string, start time.Time, theirs []api.Phase) {
	own := msSince(start)
	for _, p := range theirs {
		own -= p.MS
	}
	l.list = append(l.list, api.Phase{Side: l.side, Name: name, MS: max(own, 0), Frozen: l.frozen})
	for _, p := range theirs {
		// The other node's step is frozen if it says so (a step after
		// its resume is not) and the job was stopped here.
		p.Frozen = p.Frozen && l.frozen
		l.list = append(l.list, p)
	}
}

// frozenMS is the time of the steps the job was stopped in.
func (l *phaseLog) frozenMS() float64 { return ckpt.Times(l.list).Sum(true) }

// maxPhases bounds the steps a node takes from the other's answer.
const maxPhases = 32

// destSteps are the names a destination gives its steps; another name
// from a peer (a newer roam's) is taken as "other", so that the metrics'
// labels stay a known set.
var destSteps = map[string]bool{
	"persist": true, "receive": true, "lazy-pages daemon": true, "job cgroup": true,
	"criu start": true, "criu setup": true, "criu fork": true, "criu restore": true,
	"timerfds": true, "cpu cgroup": true, "check creds": true, "check files": true, "adopt": true,
	"resume": true, "discard": true,
}

// theirPhases are the steps the other node sent, as that node's side;
// past maxPhases, or with a time out of range, none is taken.
func theirPhases(ps []api.Phase, side string) []api.Phase {
	if len(ps) > maxPhases {
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
