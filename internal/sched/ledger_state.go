package sched

// A ledger's memory in exported form: a round's recorded inputs carry it,
// so that the decision replays (sched.Peers, LedgerFrom(...).Complete,
// Decide) from the ledger the node had, in the simulator or a test.

import (
	"slices"
	"sort"
	"time"
)

// LedgerState is everything a Ledger remembers, in order (by job or node
// id), so that two equal ledgers give equal states.
type LedgerState struct {
	Admitted []Admission `json:"admitted,omitempty"`
	Heard    []HeardLoad `json:"heard,omitempty"`
	Recent   []Move      `json:"recent,omitempty"`
	Failed   []Failure   `json:"failed,omitempty"`
	Running  bool        `json:"running,omitempty"`
	Refused  bool        `json:"refused,omitempty"`
	Retried  []time.Time `json:"retried,omitempty"`
}

// Admission is a move this node agreed to take, counted until Until.
type Admission struct {
	Move  Move      `json:"move"`
	Until time.Time `json:"until"`
}

// HeardLoad is a peer's load from its answer to a move, heard At.
type HeardLoad struct {
	Node      string    `json:"node"`
	Load      float64   `json:"load"`
	MemFreeMB float64   `json:"mem_free_mb"`
	Least     float64   `json:"least"`
	MemHeldMB float64   `json:"mem_held_mb"`
	At        time.Time `json:"at"`
}

// Failure is when a policy's move of a job last failed.
type Failure struct {
	Job string    `json:"job"`
	At  time.Time `json:"at"`
}

// State is the ledger's memory, copied.
func (l *Ledger) State() LedgerState {
	s := LedgerState{Recent: slices.Clone(l.recent), Running: l.running, Refused: l.refused, Retried: slices.Clone(l.retried)}
	for _, a := range l.admitted {
		s.Admitted = append(s.Admitted, Admission{a.mv, a.until})
	}
	sort.Slice(s.Admitted, func(i, j int) bool { return s.Admitted[i].Move.Job < s.Admitted[j].Move.Job })
	for id, h := range l.heard {
		s.Heard = append(s.Heard, HeardLoad{id, h.load, h.memFreeMB, h.least, h.memHeldMB, h.at})
	}
	sort.Slice(s.Heard, func(i, j int) bool { return s.Heard[i].Node < s.Heard[j].Node })
	for job, at := range l.failed {
		s.Failed = append(s.Failed, Failure{job, at})
	}
	sort.Slice(s.Failed, func(i, j int) bool { return s.Failed[i].Job < s.Failed[j].Job })
	return s
}

// LedgerFrom is a ledger that remembers what s says.
func LedgerFrom(s LedgerState) Ledger {
	l := Ledger{recent: slices.Clone(s.Recent), running: s.Running, refused: s.Refused, retried: slices.Clone(s.Retried)}
	for _, a := range s.Admitted {
		if l.admitted == nil {
			l.admitted = map[string]admission{}
		}
		l.admitted[a.Move.Job] = admission{a.Move, a.Until}
	}
	for _, h := range s.Heard {
		if l.heard == nil {
			l.heard = map[string]heardLoad{}
		}
		l.heard[h.Node] = heardLoad{h.Load, h.MemFreeMB, h.Least, h.MemHeldMB, h.At}
	}
	for _, f := range s.Failed {
		if l.failed == nil {
			l.failed = map[string]time.Time{}
		}
		l.failed[f.Job] = f.At
	}
	return l
}
