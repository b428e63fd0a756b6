package agent

// The job table's part of the relay: what the push loop copies of the
// jobs running here and notes of what it sent, the acknowledgements of
// their homes, the news a home takes, and the readers waiting for it.

import (
	"time"

	"roam/internal/agent/relay"
	"roam/internal/api"
	"roam/internal/job"
)

// pushItem is one job's news in the making: copied from the table
// (pushItems), read without the lock, noted in it (pushed).
type pushItem struct {
	id string
	lj *localJob // the table's entry, to know it is still the same job
	st newsState
	// checkCap: its spool is held against limits.output_bytes this time.
	checkCap bool
	// Found without the lock: its news, whether it has any, and why
	// this node kills it (its output passed the limit), if it does.
	u      update
	send   bool
	killed string
}

// pushItems copies what the news of every job running here and not
// moving is read from.
func (j *jobs) pushItems(now time.Time) []*pushItem {
	j.mu.Lock()
	defer j.mu.Unlock()
	var items []*pushItem
	for id, lj := range j.local {
		if lj.migrating {
			continue
		}
		it := &pushItem{id: id, lj: lj, st: lj.newsState(), checkCap: lj.why == "" && now.Sub(lj.sizeChecked) >= time.Second}
		if it.checkCap {
			lj.sizeChecked = now
		}
		items = append(items, it)
	}
	return items
}

// pushKill is a job this node kills, its output over the limit.
type pushKill struct {
	pid int
	tix uint64
}

// pushed notes the news that goes to each job's home and batches it by
// home node, in batches of no more than pushBatch bytes of output (one
// job's news may be more). A job that began to migrate, or ended here,
// while its files were read is left to the migration, or gone; one with
// nothing new is sent a heartbeat every aliveEvery.
func (j *jobs) pushed(items []*pushItem, self string, now time.Time) ([]*homeBatch, []pushKill) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []*homeBatch
	var kills []pushKill
	last := map[string]*homeBatch{}
	for _, it := range items {
		lj := it.lj
		if j.local[it.id] != lj || lj.migrating {
			continue
		}
		if it.killed != "" && lj.why == "" {
			lj.why = it.killed
			kills = append(kills, pushKill{lj.rec.PID, lj.rec.StartTix})
		}
		u := it.u
		u.Why = lj.why
		if !it.send && now.Sub(lj.lastPush) < aliveEvery {
			continue
		}
		lj.lastPush = now
		moves := lj.rec.Moves
		u.ID, u.Node, u.Inc, u.Moves = it.id, self, lj.rec.Inc, &moves
		// Each update costs its JSON besides its output: a heartbeat of
		// thousands of jobs must still fit a request.
		size := len(u.Out) + len(u.Err) + relay.UpdateOverhead
		b := last[lj.rec.Home]
		if b == nil || b.size+size > pushBatch {
			b = &homeBatch{home: lj.rec.Home, addr: lj.rec.HomeAddr}
			last[lj.rec.Home] = b
			out = append(out, b)
		}
		b.ups = append(b.ups, u)
		b.size += size
	}
	return out, kills
}

// acked takes a home's acknowledgements: what it has of each job's
// output, and the jobs it has everything of, which leave the table
// (their spool dirs are returned, to remove). gone are the jobs the home
// has no record of, to kill if alive.
func (j *jobs) acked(acks map[string]ack) (gone []job.Local, dirs []string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	for id, k := range acks {
		lj := j.local[id]
		if lj == nil {
			continue
		}
		if k.Gone {
			gone = append(gone, lj.rec)
		}
		lj.ackOut, lj.ackErr = k.Out, k.Err
		if k.Done {
			if lj.stdin != nil {
				lj.stdin.Close()
			}
			delete(j.local, id)
			_ = j.store.DeleteLocal(id)
			dirs = append(dirs, lj.rec.Dir)
		}
	}
	return gone, dirs
}

// known says of each update whether this home has a record of its job,
// and whether it is news of an older incarnation (stale).
func (j *jobs) known(ups []update) (known, stale map[string]bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	known, stale = map[string]bool{}, map[string]bool{}
	for _, u := range ups {
		r := j.home[u.ID]
		known[u.ID] = r != nil
		stale[u.ID] = r != nil && u.Inc < r.Inc
	}
	return known, stale
}

// newsTaken is what a home took of a push (takeNews).
type newsTaken struct {
	acks   map[string]ack
	events []api.Event
	// done: jobs that ended, all their output in; drops: their periodic
	// checkpoints, no longer needed; refused: updates of old copies.
	done    []string
	drops   map[string]api.Checkpoint
	refused []update
}

// takeNews applies the updates whose output takeOutput appended (got,
// known, stale) to the home records (relay.Apply) and writes the changed
// ones; on an error nothing changes and nothing is acknowledged.
func (j *jobs) takeNews(ups []update, got [][2]int64, known, stale map[string]bool, self string, now time.Time) (newsTaken, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	t := newsTaken{acks: map[string]ack{}, drops: map[string]api.Checkpoint{}}
	next := map[string]*job.Record{} // changed copies of records
	heard := map[string]bool{}
	for i, u := range ups {
		rec, refused := j.newsOf(u, known[u.ID], stale[u.ID], next, self)
		if refused != nil {
			if refused.Gone && known[u.ID] && j.home[u.ID] != nil {
				t.refused = append(t.refused, u)
			}
			t.acks[u.ID] = *refused
			continue
		}
		no, ne := got[i][0], got[i][1]
		res := relay.Apply(rec, u, no, ne, now)
		if res.Event != nil {
			t.events = append(t.events, *res.Event)
		}
		heard[u.Node] = heard[u.Node] || res.Heard
		if res.Drop != nil {
			t.drops[u.ID] = *res.Drop
		}
		if res.Changed {
			next[u.ID] = rec // a copy taken from next is there already
		}
		if res.Over {
			t.done = append(t.done, u.ID)
		}
		t.acks[u.ID] = ack{Out: no, Err: ne, Done: res.Over}
	}
	if err := j.putHome(next); err != nil {
		return newsTaken{}, err
	}
	for n, ok := range heard {
		if ok {
			j.heard[n] = now
		}
	}
	for _, u := range ups {
		j.wakeReaders(u.ID)
	}
	return t, nil
}

// homeWait copies a home record and returns what closes when it has
// news (Output's long poll).
func (j *jobs) homeWait(id string) (job.Record, <-chan struct{}, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	rec := j.home[id]
	if rec == nil {
		return job.Record{}, nil, false
	}
	ch := j.wake[id]
	if ch == nil {
		ch = make(chan struct{})
		j.wake[id] = ch
	}
	return *rec, ch, true
}

// writeStdin writes what the stdin pipe of job id takes at once, and
// closes it on eof once all is written. found is false when the job runs
// not here or takes no stdin.
func (j *jobs) writeStdin(id string, data []byte, eof bool) (n int, found bool, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	lj := j.local[id]
	if lj == nil || lj.stdin == nil {
		return 0, false, nil
	}
	n, err = writeNow(lj.stdin, data)
	if err == nil && eof && n == len(data) {
		lj.stdin.Close()
		lj.stdin = nil
	}
	return n, true, err
}
