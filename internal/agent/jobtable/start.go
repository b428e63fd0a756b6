package jobtable

import (
	"time"

	"roam/internal/job"
)

// The home's side of a start: its records turn running once their nodes
// answered, each with its start as its node said.

// MarkStarted marks these home records running once their nodes
// confirmed their start (a job that already reported its end, a fast one,
// stays finished), each record's start taken from starts (when it ran on
// its node, launch's StartResult.At), a finished one's too. A record whose
// start changed since recs were read (a restart) keeps its own.
func (j *Table) MarkStarted(recs []job.Record, starts map[string]time.Time) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	next := map[string]*job.Record{}
	for _, r := range recs {
		h := j.home[r.ID]
		if h == nil || (h.State != job.StateStarting && !h.Started.Equal(r.Started)) {
			continue
		}
		c := *h
		at, ok := starts[r.ID]
		if ok && c.Started.Equal(r.Started) {
			c.Started = at
		}
		if c.State == job.StateStarting {
			c.State = job.StateRunning
		} else if !ok {
			continue
		}
		next[r.ID] = &c
	}
	return j.putHome(next)
}
