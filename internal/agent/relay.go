package agent

// A job's output and exit status go from the node it runs on to its home
// node (the push loop, takeUpdates), where `roam run` reads them (Output);
// its stdin goes the other way (Stdin).

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"syscall"
	"time"

	"roam/internal/agent/jobtable"
	"roam/internal/agent/peer"
	"roam/internal/agent/relay"
	"roam/internal/agent/spool"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/job"
)

// update and ack are the relay's wire types (package relay).
type (
	update = relay.Update
	ack    = relay.Ack
)

// ---- current node: push output and exit status home ----

// pushLoop pushes news every pushEvery while jobs run here; with none it
// sleeps until a start kicks it, so an idle agent does not wake 20 times a
// second for nothing.
func (a *Agent) pushLoop() {
	defer a.wg.Done()
	t := time.NewTicker(pushEvery)
	defer t.Stop()
	for {
		tick := t.C
		if !(a.jobs.Count() > 0) {
			tick = nil
		}
		select {
		case <-a.stop:
			return
		case <-tick:
		case <-a.jobs.Kicked():
		}
		a.pushOnce()
	}
}

// pushOnce sends every job's news to its home (this node or another). A
// home membership says is dead is left until it is back: its jobs run on
// and their output waits in their spool (home loss), and a call to it
// would hold up every other home's news until it timed out.
func (a *Agent) pushOnce() {
	for _, b := range a.pushBatches() {
		if !a.members.Reachable(b.Home) {
			continue
		}
		var acks map[string]ack
		if err := a.peers.CallAddr(b.Addr, http.MethodPost, peer.Updates, b.Ups, &acks); err != nil {
			a.log.Debug("push to home", "home", b.Home, "err", err)
			continue
		}
		a.applyAcks(acks)
	}
}

// pushBatches collects every job's news by home node, in batches of no
// more than jobtable.PushBatch bytes of output (one job's news may be more). The
// job lock is held only to copy what each job's news needs and to note
// what was sent: the spools and /proc are read without it, so that a
// slow disk or thousands of jobs do not stop every request of the node.
func (a *Agent) pushBatches() []*jobtable.HomeBatch {
	now := time.Now()
	items := a.jobs.PushItems(now)
	for _, it := range items {
		if it.CheckCap {
			if n := spool.Size(it.St.Dir); n > a.cfg.Limits.OutputBytes {
				it.Killed = fmt.Sprintf("killed: its output passed %s (limits.output_bytes)", api.Bytes(a.cfg.Limits.OutputBytes))
				a.log.Warn("job killed: output limit", "job", it.Id, "bytes", n, "limit", a.cfg.Limits.OutputBytes)
			}
		}
		it.U, it.Send = news(it.St, a.procs)
	}
	out, kills := a.jobs.Pushed(items, a.cfg.NodeID, now)
	for _, k := range kills {
		go a.procs.Kill(k.Pid, k.Tix, 5*time.Second)
	}
	return out
}

// news reads what the home does not have yet: the output past what it
// acknowledged, and the exit status once the job has ended. It does I/O
// and takes no lock.
func news(st jobtable.NewsState, procs job.Processes) (update, bool) {
	if st.AckOut < 0 || st.AckErr < 0 {
		// After a restart: ask the home what it has first.
		return update{OutOff: -1, ErrOff: -1}, true
	}
	// Read the status before the output: output written before the exit
	// is then surely in the files we read next.
	code, ended := job.ReadStatus(st.Dir)
	if !ended && !procs.Alive(st.Pid, st.Tix) {
		if code, ended = job.ReadStatus(st.Dir); !ended {
			code, ended = 128+int(syscall.SIGKILL), true // killed before it could write
		}
	}
	out, _ := job.ReadSpool(st.Dir, "stdout", st.AckOut, pushChunk)
	errb, _ := job.ReadSpool(st.Dir, "stderr", st.AckErr, pushChunk)
	u := update{OutOff: st.AckOut, Out: out, ErrOff: st.AckErr, Err: errb}
	if ended && len(out) < pushChunk && len(errb) < pushChunk {
		u.Exit = &code
		u.FinalOut = st.AckOut + int64(len(out))
		u.FinalErr = st.AckErr + int64(len(errb))
	}
	return u, len(out) > 0 || len(errb) > 0 || u.Exit != nil
}

func (a *Agent) applyAcks(acks map[string]ack) {
	// gone: the home has no record, killed if alive; dirs: spools of
	// jobs whose home has everything.
	gone, dirs := a.jobs.Acked(acks)
	if len(dirs) > 0 {
		a.gossip.Kick()
	}
	// /proc and the disk without the job lock.
	for _, l := range gone {
		if a.procs.Alive(l.PID, l.StartTix) {
			a.log.Warn("job ended: its home has no record of this copy (none of the job, or of an older incarnation)", "job", l.ID, "home", l.Home)
			a.procs.Kill(l.PID, l.StartTix, 5*time.Second)
		}
	}
	for _, d := range dirs {
		os.RemoveAll(d)
	}
}

// ---- home node: take updates, serve output ----

// takeUpdates appends output at its offset (idempotent: a resent piece is
// skipped) and records an exit once all output is in. What it acknowledges
// is durable first: the changed records are in the job table, and the
// output of a job acknowledged as done is synced to disk (its node then
// deletes its own copy). When the table cannot be written, nothing is
// acknowledged and nothing changes in memory: the node sends it again.
func (a *Agent) takeUpdates(ups []update) (map[string]ack, error) {
	got, known, stale := a.takeOutput(ups)
	t, err := a.jobs.TakeNews(ups, got, known, stale, a.cfg.NodeID, time.Now())
	if err != nil {
		a.log.Error("job table: updates not taken", "err", err)
		return nil, errkind.New(peer.ErrUnavailable, "job table of node %s: %v", a.cfg.NodeID, err)
	}
	for _, u := range t.Refused {
		a.log.Warn("news of an old copy refused: its node ends it", "job", u.ID, "node", u.Node, "inc", u.Inc)
	}
	a.settleEnded(t.Done, t.Drops, t.Acks)
	// Recorded once the records are written, and only then.
	for _, e := range t.Events {
		a.event(e)
	}
	return t.Acks, nil
}

// takeOutput appends the updates' output to the home spools, without the
// job lock: each spool is written under a lock of its own (package
// spool), so that two pushes of one job (a migration's last one and the
// push loop's) append in turn. A job this node has no record of (not
// known), or news of a copy of an older incarnation (stale), gets nothing
// written; got is each update's sizes of the spool after it.
func (a *Agent) takeOutput(ups []update) (got [][2]int64, known, stale map[string]bool) {
	known, stale = a.jobs.Known(ups)
	got = make([][2]int64, len(ups))
	for i, u := range ups {
		if !known[u.ID] || stale[u.ID] {
			continue
		}
		// A copy restarted since gets nothing: its cut spool is the new
		// copy's.
		if no, ne, ok := a.spools.Append(u.ID, u.Inc, spool.Piece{OutOff: u.OutOff, Out: u.Out, ErrOff: u.ErrOff, Err: u.Err}); ok {
			got[i] = [2]int64{no, ne}
		}
	}
	return got, known, stale
}

// settleEnded follows the end of the jobs done, their records written:
// their periodic checkpoints (drops) are dropped, their moves no longer
// load their targets, and their end is acknowledged (out) only once their
// output is on disk at this home. It runs without the job lock.
func (a *Agent) settleEnded(done []string, drops map[string]api.Checkpoint, out map[string]ack) {
	for id, c := range drops {
		a.dropCheckpointOn(c.StoredOn, id, time.Time{})
	}
	for _, id := range done {
		a.rounds.Ended(id)
		if err := a.spools.Sync(id); err != nil {
			a.log.Error("home spool: sync", "job", id, "err", err)
			k := out[id]
			k.Done = false // the node keeps its copy and sends again
			out[id] = k
		}
	}
}

// Output returns a home job's output from the given offsets, waiting up to
// wait for news when there is none.
func (a *Agent) Output(id string, outOff, errOff int64, wait time.Duration) (api.Output, error) {
	deadline := time.Now().Add(min(wait, maxWait))
	for {
		r, ch, ok := a.jobs.HomeWait(id)
		if !ok {
			return api.Output{}, errkind.New(peer.ErrNotFound, "unknown job %s", id)
		}

		o := api.Output{ID: id, State: r.State, Ended: r.Over(), ExitCode: r.ExitCode, Node: r.Node, LostAt: r.LostAt, Inc: r.Inc}
		if n := len(r.Restarts); n > 0 {
			o.Restart = &r.Restarts[n-1]
		}
		o.Stdout, _ = a.spools.Read(id, "stdout", outOff, outputChunk)
		o.Stderr, _ = a.spools.Read(id, "stderr", errOff, outputChunk)
		o.StdoutOff = outOff + int64(len(o.Stdout))
		o.StderrOff = errOff + int64(len(o.Stderr))
		if len(o.Stdout) > 0 || len(o.Stderr) > 0 || o.Ended || time.Now().After(deadline) {
			if len(o.Stdout) > 0 || len(o.Stderr) > 0 {
				// More may be waiting: not ended until it is all read.
				o.Ended, o.ExitCode = false, nil
			}
			return o, nil
		}
		select {
		case <-ch:
		case <-time.After(time.Until(deadline)):
		case <-a.stop:
			return o, nil
		}
	}
}

// ---- stdin ----

// Stdin passes bytes to a job's stdin; eof closes it.
func (a *Agent) Stdin(c Caller, id string, data []byte, eof bool) (api.StdinResult, error) {
	r, err := a.record(id)
	if err != nil {
		return api.StdinResult{}, err
	}
	if !canTouch(c, r.UID) {
		return api.StdinResult{}, errkind.New(peer.ErrPermission, "%s: permission denied", id)
	}
	return a.stdinOn(r.Node, id, data, eof)
}

// stdinOn passes bytes to the stdin of job id, which runs on node.
func (a *Agent) stdinOn(node, id string, data []byte, eof bool) (api.StdinResult, error) {
	q := peer.Stdin + "?id=" + url.QueryEscape(id)
	if eof {
		q += "&eof=1"
	}
	var res api.StdinResult
	err := a.peers.Call(node, http.MethodPost, q, bytes.NewReader(data), &res)
	return res, err
}

// stdinLocal passes bytes to the stdin of a job running here, or on to
// the node it moved to.
func (a *Agent) stdinLocal(id string, data []byte, eof bool) (api.StdinResult, error) {
	_, _, movedTo := a.settledLocal(id)
	if movedTo != "" {
		return a.stdinOn(movedTo, id, data, eof)
	}
	// What the pipe takes now, and no more: a job that does not read its
	// stdin holds no buffer and no goroutine of the agent's, whatever is
	// sent to it. The pipe's contents move with the job.
	n, found, err := a.jobs.WriteStdin(id, data, eof)
	switch {
	case !found:
		return api.StdinResult{}, errkind.New(peer.ErrNotFound, "job %s takes no stdin here", id)
	case err != nil:
		return api.StdinResult{Accepted: n}, errkind.New(peer.ErrUnavailable, "stdin of job %s: %v", id, err)
	}
	return api.StdinResult{Accepted: n}, nil
}
