package jobtable

// The job table's part of the memory admission: what the memory requests
// (roam run --mem) of the jobs here add up to, and the places held for
// the jobs starting or arriving here, so that two that come at once are
// judged one after the other (sched.MemFits).

import (
	"roam/internal/resources"
	"roam/internal/sched"
)

// MemHeld is what the memory requests of the jobs here add up to, in
// bytes: the local jobs' (running, or ended and not yet all told to
// their home) and those reserved for jobs starting or arriving, but
// job but's own ("": every job's).
func (j *Table) MemHeld(but string) int64 {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.memHeld(but)
}

// memHeld is MemHeld; mu held.
func (j *Table) memHeld(but string) int64 {
	var n int64
	for id, lj := range j.local {
		if id != but {
			n += lj.Rec.Req.MemBytes
		}
	}
	for id, b := range j.reserved {
		if id != but && j.local[id] == nil {
			n += b
		}
	}
	return n
}

// ReserveMem holds a place for job id, of request req, which is to start
// or arrive here, if it fits in jobsMem bytes with the requests of the
// jobs here and otherMB MiB more (the moves this node admitted and has
// not received, the job's own left out): the refusal names --mem and the
// node otherwise, and nothing is held. The place ends when the job
// becomes a local job (AddLocals, Adopt) or with Unreserve. A job
// reserved again takes its own place's.
func (j *Table) ReserveMem(node, id string, req resources.Request, jobsMem int64, otherMB float64) error {
	if req.MemBytes <= 0 {
		return nil
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	held := float64(j.memHeld(id))/(1<<20) + otherMB
	if err := sched.MemFits(node, float64(jobsMem)/(1<<20), held, req); err != nil {
		return err
	}
	if j.reserved == nil {
		j.reserved = map[string]int64{}
	}
	j.reserved[id] = req.MemBytes
	return nil
}

// Unreserve ends job id's place: it did not start or arrive.
func (j *Table) Unreserve(id string) {
	j.mu.Lock()
	delete(j.reserved, id)
	j.mu.Unlock()
}
