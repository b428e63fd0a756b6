package jobtable

// The job table's part of the relay: what the push loop copies of the
// jobs running here and notes of what it sent, the acknowledgements of
// their homes, the news a home takes, and the readers waiting for it.

import (
	"os"
	"time"

	"roam/internal/agent/httpx"
	"roam/internal/agent/relay"
	"roam/internal/api"
	"roam/internal/job"
	"roam/internal/migrate"
	"roam/internal/resources"

	"golang.org/x/sys/unix"
)

// AliveEvery is how often a node tells a job's home that the job still
// runs there when it has nothing else to say. It is what brings a lost
// job back without output, and what tells a node that a job's home has
// forgotten it (a half-started run), so that it ends it.
const AliveEvery = 5 * time.Second

// PushBatch bounds the output bytes of one push (4/3 as many once JSON's
// base64 has them), below the body a peer reads (httpx.MaxBody).
const PushBatch = httpx.MaxBody / 2

// PushItem is one job's news in the making: copied from the table
// (pushItems), read without the lock, noted in it (pushed).
type PushItem struct {
	Id string
	Lj *Local // the table's entry, to know it is still the same job
	St NewsState
	// CheckCap: its spool is held against limits.output_bytes this time.
	CheckCap bool
	// Found without the lock: its news, whether it has any, and why
	// this node kills it (its output passed the limit), if it does, or
	// why it ended (out of memory), if it did.
	U      relay.Update
	Send   bool
	Killed string
	Ended  string
}

// PushItems copies what the news of every job running here and not
// moving is read from.
func (j *Table) PushItems(now time.Time) []*PushItem {
	j.mu.Lock()
	defer j.mu.Unlock()
	var items []*PushItem
	for id, lj := range j.local {
		if lj.Migrating {
			continue
		}
		it := &PushItem{Id: id, Lj: lj, St: lj.newsState(), CheckCap: lj.why == "" && now.Sub(lj.sizeChecked) >= time.Second}
		if it.CheckCap {
			lj.sizeChecked = now
		}
		items = append(items, it)
	}
	return items
}

// PushKill is a job this node kills, its output over the limit.
type PushKill struct {
	Pid int
	Tix uint64
}

// Pushed notes the news that goes to each job's home and batches it by
// home node, in batches of no more than PushBatch bytes of output (one
// job's news may be more). A job that began to migrate, or ended here,
// while its files were read is left to the migration, or gone; one with
// nothing new is sent a heartbeat every alive (AliveEvery, or less).
func (j *Table) Pushed(items []*PushItem, self string, alive time.Duration, now time.Time) ([]*HomeBatch, []PushKill) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []*HomeBatch
	var kills []PushKill
	last := map[string]*HomeBatch{}
	for _, it := range items {
		lj := it.Lj
		if j.local[it.Id] != lj || lj.Migrating {
			continue
		}
		if it.Killed != "" && lj.why == "" {
			lj.why = it.Killed
			kills = append(kills, PushKill{lj.Rec.PID, lj.Rec.StartTix})
		}
		if it.Ended != "" && lj.why == "" {
			lj.why = it.Ended
		}
		u := it.U
		u.Why = lj.why
		if !it.Send && now.Sub(lj.lastPush) < alive {
			continue
		}
		lj.lastPush = now
		moves := lj.Rec.Moves
		u.ID, u.Node, u.Inc, u.Moves = it.Id, self, lj.Rec.Inc, &moves
		// Each update costs its JSON besides its output: a heartbeat of
		// thousands of jobs must still fit a request.
		size := len(u.Out) + len(u.Err) + relay.UpdateOverhead
		b := last[lj.Rec.Home]
		if b == nil || b.Size+size > PushBatch {
			b = &HomeBatch{Home: lj.Rec.Home, Addr: lj.Rec.HomeAddr}
			last[lj.Rec.Home] = b
			out = append(out, b)
		}
		b.Ups = append(b.Ups, u)
		b.Size += size
	}
	return out, kills
}

// Acked takes a home's acknowledgements: what it has of each job's
// output, and the jobs it has everything of, which leave the table
// (their spool dirs are returned, to remove). gone are the jobs the home
// has no record of, to kill if alive.
func (j *Table) Acked(acks map[string]relay.Ack) (gone []job.Local, dirs []string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	var done []string
	var uncapped []job.Local
	for id, k := range acks {
		lj := j.local[id]
		if lj == nil {
			continue
		}
		if k.Gone {
			gone = append(gone, lj.Rec)
		}
		if !lj.Rec.LeaseCap.IsZero() && k.Renews() {
			// Its home took its news from here: the move is its home's.
			lj.Rec.LeaseCap = time.Time{}
			uncapped = append(uncapped, lj.Rec)
		}
		lj.AckOut, lj.AckErr = k.Out, k.Err
		if k.Done {
			if lj.Stdin != nil {
				lj.Stdin.Close()
			}
			delete(j.local, id)
			done = append(done, id)
			dirs = append(dirs, lj.Rec.Dir)
			if lj.Rec.Req.MemBytes > 0 && j.forRoom {
				j.KickRelease() // its room is free: this node's own jobs may wait for it
			}
		}
	}
	_ = j.store.DeleteLocals(done...)
	_ = j.store.PutLocals(uncapped...) // else kept after a restart: a lease held shorter, never longer
	return gone, dirs
}

// Known says of each update whether this home has a record of its job,
// and whether it is news of an older incarnation, or of a pending job
// (stale).
func (j *Table) Known(ups []relay.Update) (known, stale map[string]bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	known, stale = map[string]bool{}, map[string]bool{}
	for _, u := range ups {
		r := j.home[u.ID]
		known[u.ID] = r != nil
		// A pending job's copy is of a start the home took back (newsOf).
		stale[u.ID] = r != nil && (u.Inc < r.Inc || r.State == job.StatePending)
	}
	return known, stale
}

// NewsTaken is what a home took of a push (takeNews).
type NewsTaken struct {
	Acks   map[string]relay.Ack
	Events []api.Event
	// Done: jobs that ended, all their output in; drops: their periodic
	// checkpoints, no longer needed; refused: updates of old copies.
	Done    []string
	Drops   map[string]api.Checkpoint
	Refused []relay.Update
	// Fenced: jobs their nodes' fences killed, to restart (relay.Result).
	Fenced []job.Record
}

// TakeNews applies the updates whose output takeOutput appended (got,
// known, stale) to the home records (relay.Apply) and writes the changed
// ones; on an error nothing changes and nothing is acknowledged.
func (j *Table) TakeNews(ups []relay.Update, got [][2]int64, known, stale map[string]bool, self string, now time.Time) (NewsTaken, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	t := NewsTaken{Acks: map[string]relay.Ack{}, Drops: map[string]api.Checkpoint{}}
	next := map[string]*job.Record{} // changed copies of records
	heard := map[string]bool{}
	for i, u := range ups {
		if h, _ := migrate.JobHome(u.ID); h != self {
			continue // not this home's job: no acknowledgement (newsOf)
		}
		rec, refused := j.newsOf(u, known[u.ID], stale[u.ID], next)
		if refused != nil {
			if refused.Gone && known[u.ID] && j.home[u.ID] != nil {
				t.Refused = append(t.Refused, u)
			}
			t.Acks[u.ID] = *refused
			continue
		}
		no, ne := got[i][0], got[i][1]
		res := relay.Apply(rec, u, no, ne, now)
		if res.Event != nil {
			t.Events = append(t.Events, *res.Event)
		}
		heard[u.Node] = heard[u.Node] || res.Heard
		if res.Drop != nil {
			t.Drops[u.ID] = *res.Drop
		}
		if res.Changed {
			next[u.ID] = rec // a copy taken from next is there already
		}
		if res.Over {
			t.Done = append(t.Done, u.ID)
			j.kickIfSweep(rec)
		}
		if res.Preempted {
			j.KickRelease() // its room is free, and it waits
		}
		if res.Fenced {
			t.Fenced = append(t.Fenced, *rec)
		}
		t.Acks[u.ID] = relay.Ack{Out: no, Err: ne, Done: res.Over || res.Preempted || res.Fenced, Heard: &res.Heard}
	}
	if err := j.putHome(next); err != nil {
		return NewsTaken{}, err
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

// HomeWait copies a home record and returns what closes when it has
// news (Output's long poll).
func (j *Table) HomeWait(id string) (job.Record, <-chan struct{}, bool) {
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

// WriteStdin writes what the stdin pipe of job id takes at once, and
// closes it on eof once all is written. found is false when the job runs
// not here or takes no stdin.
func (j *Table) WriteStdin(id string, data []byte, eof bool) (n int, found bool, err error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	lj := j.local[id]
	if lj == nil || lj.Stdin == nil {
		return 0, false, nil
	}
	n, err = writeNow(lj.Stdin, data)
	if err == nil && eof && n == len(data) {
		lj.Stdin.Close()
		lj.Stdin = nil
	}
	return n, true, err
}

// HomeBatch is news for one home node, sent in one request.
type HomeBatch struct {
	Home, Addr string
	Ups        []relay.Update
	Size       int // bytes of output in ups
}

// writeNow writes what a non-blocking pipe takes at once.
func writeNow(f *os.File, data []byte) (int, error) {
	if len(data) == 0 {
		return 0, nil
	}
	rc, err := f.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var werr error
	if err := rc.Write(func(fd uintptr) bool {
		for n < len(data) {
			k, err := unix.Write(int(fd), data[n:])
			if err == unix.EINTR {
				continue
			}
			if err == unix.EAGAIN {
				break
			}
			if err != nil {
				werr = err
				break
			}
			n += k
		}
		return true // done either way: never wait for the reader
	}); err != nil {
		return n, err
	}
	return n, werr
}

// NewsState is what a job's news is read from: copied under the job
// lock, read without it.
type NewsState struct {
	Dir            string
	Pid            int
	Tix            uint64
	AckOut, AckErr int64
	// Req is the job's request, which says why it ran out of memory.
	Req resources.Request
	Rec job.Local // what it used before this node, for its end
	// RootSignal is the last signal root sent it, 0 none.
	RootSignal int
}

func (lj *Local) newsState() NewsState {
	return NewsState{Dir: lj.Rec.Dir, Pid: lj.Rec.PID, Tix: lj.Rec.StartTix, AckOut: lj.AckOut, AckErr: lj.AckErr, Req: lj.Rec.Req, Rec: lj.Rec,
		RootSignal: lj.rootSignal}
}

// Kill notes that this node kills job id, the copy of process pid (not
// moving, not killed already), for why, which its home is told with its
// end; ok is false, and nothing noted, otherwise.
func (j *Table) Kill(id string, pid int, why string) (k PushKill, ok bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	lj := j.local[id]
	if lj == nil || lj.Rec.PID != pid || lj.Migrating || lj.why != "" {
		return PushKill{}, false
	}
	lj.why = why
	return PushKill{lj.Rec.PID, lj.Rec.StartTix}, true
}
