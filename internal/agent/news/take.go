package news

// The home: it takes a push of its jobs' news (peer.Updates) in three
// steps, by what each applies: the output to the spools, the rest of
// the news (where the job runs, back from lost, the reason its node ended
// it, its exit) to the records (package relay's rule, through the job
// table), and what follows the end of the jobs that ended.

import (
	"time"

	"roam/internal/agent/peer"
	"roam/internal/agent/relay"
	"roam/internal/agent/spool"
	"roam/internal/api"
	"roam/internal/errkind"
)

// TakeUpdates is peer.Updates: it appends output at its offset
// (idempotent: a resent piece is skipped) and records an exit once all
// output is in. What it acknowledges is durable first: the changed
// records are in the job table, and the output of a job acknowledged as
// done is synced to disk (its node then deletes its own copy). When the
// table cannot be written, nothing is acknowledged and nothing changes in
// memory: the node sends it again.
func (r *Relay) TakeUpdates(ups []relay.Update) (map[string]relay.Ack, error) {
	got, known, stale, full := r.takeOutput(ups)
	t, err := r.c.Jobs.TakeNews(ups, got, known, stale, r.c.Self, time.Now())
	if err != nil {
		r.c.Log.Error("job table: updates not taken", "err", err)
		return nil, errkind.New(peer.ErrUnavailable, "job table of node %s: %v", r.c.Self, err)
	}
	for id := range full {
		if k, ok := t.Acks[id]; ok && !k.Done && !k.Gone {
			k.Full = true
			t.Acks[id] = k
		}
	}
	for _, u := range t.Refused {
		r.c.Log.Warn("news of an old copy refused: its node ends it", "job", u.ID, "node", u.Node, "inc", u.Inc)
	}
	// Its node's fence killed it: nothing runs it now, and its
	// checkpoint brings it back.
	for _, rec := range t.Fenced {
		go r.c.RestartLost(rec, rec.Node, true)
	}
	ended := make(map[string]bool, len(t.Done))
	for _, id := range t.Done {
		ended[id] = true
	}
	r.noteFiles(ups, got, ended)
	r.settleEnded(t.Done, t.Drops, t.Acks)
	// Recorded once the records are written, and only then.
	for _, e := range t.Events {
		r.c.Event(e)
	}
	return t.Acks, nil
}

// takeOutput appends the updates' output to the home spools, without the
// job lock: each spool is written under a lock of its own (package
// spool), so that two pushes of one job (a migration's last one and the
// push loop's) append in turn. A job this node has no record of (not
// known), or news of a copy of an older incarnation (stale), gets nothing
// written; got is each update's sizes of the spool after it. Output the
// state disk has no room for (limits.HomeOutputShort) is not written
// either: full are those jobs (Ack.Full). An end among them is recorded
// at once with the output this home has (cutEnd), not once the rest came:
// a disk full of the copies its nodes keep for it would take it never.
func (r *Relay) takeOutput(ups []relay.Update) (got [][2]int64, known, stale, full map[string]bool) {
	known, stale = r.c.Jobs.Known(ups)
	got = make([][2]int64, len(ups))
	full = map[string]bool{}
	for i, u := range ups {
		if !known[u.ID] || stale[u.ID] {
			continue
		}
		p := spool.Piece{OutOff: u.OutOff, Out: u.Out, ErrOff: u.ErrOff, Err: u.Err}
		n := int64(len(u.Out) + len(u.Err))
		ups[i].Dropped = 0 // this home's count, not a node's
		ok, done := true, func() {}
		if n > 0 || u.Exit != nil {
			ok, done = r.room(r.need(u, n), n)
		}
		if !ok {
			full[u.ID] = true
			p = spool.Piece{OutOff: -1, ErrOff: -1} // nothing written: its sizes
		}
		// A copy restarted since gets nothing: its cut spool is the new
		// copy's.
		if no, ne, ok := r.c.Spools.Append(u.ID, u.Inc, p); ok {
			got[i] = [2]int64{no, ne}
			if full[u.ID] {
				ups[i] = cutEnd(u, no, ne)
			}
		}
		done()
	}
	return got, known, stale, full
}

// need is the room update u, carrying n bytes of output, asks of this
// home: an end asks for all the output of its job the home lacks (its
// final sizes less what its spool has), so that a home with room for a
// piece of it but not for the rest does not answer its end's node "send
// the rest" and its pieces "no room" in turn, forever.
func (r *Relay) need(u relay.Update, n int64) int64 {
	if u.Exit == nil {
		return n
	}
	if out, errb, ok := r.c.Spools.Append(u.ID, u.Inc, spool.Piece{OutOff: -1, ErrOff: -1}); ok {
		return max(n, max(u.FinalOut-out, 0)+max(u.FinalErr-errb, 0))
	}
	return n
}

// room says whether this home has room for need more bytes of its jobs'
// output, of which it writes n now: its state disk's free space, less
// what it writes now for other pushes, is not short
// (limits.HomeOutputShort). While ok, the n bytes count as being written
// until done is called.
func (r *Relay) room(need, n int64) (ok bool, done func()) {
	r.roomMu.Lock()
	defer r.roomMu.Unlock()
	free := r.c.Free()
	if free >= 0 {
		free = max(free-r.writing, 0)
	}
	if r.c.Limits.HomeOutputShort(free, need) {
		return false, func() {}
	}
	r.writing += n
	return true, func() {
		r.roomMu.Lock()
		r.writing -= n
		r.roomMu.Unlock()
	}
}

// cutEnd is update u of a job whose output this home has no room for,
// out and errb bytes of it at the home: with its end, that end with the
// output the home has, the rest dropped on its node (Update.Dropped,
// counted here).
func cutEnd(u relay.Update, out, errb int64) relay.Update {
	if u.Exit == nil {
		return u
	}
	u.Dropped = max(u.FinalOut-out, 0) + max(u.FinalErr-errb, 0)
	u.FinalOut, u.FinalErr = out, errb
	return u
}

// settleEnded follows the end of the jobs done, their records written:
// their periodic checkpoints (drops) are dropped, their moves no longer
// load their targets, and their end is acknowledged (out) only once their
// output is on disk at this home. It runs without the job lock.
func (r *Relay) settleEnded(done []string, drops map[string]api.Checkpoint, out map[string]relay.Ack) {
	for id, c := range drops {
		r.c.DropCheckpoint(c.StoredOn, id, time.Time{})
	}
	for _, id := range done {
		r.c.Rounds.Ended(id)
		if err := r.c.Spools.Sync(id); err != nil {
			r.c.Log.Error("home spool: sync", "job", id, "err", err)
			k := out[id]
			k.Done = false // the node keeps its copy and sends again
			out[id] = k
		}
	}
}
