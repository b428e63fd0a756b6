package agent

// A job's output and exit status go from the node it runs on to its home
// node (the push loop, takeUpdates), where `roam run` reads them (Output);
// its stdin goes the other way (Stdin).

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/job"

	"golang.org/x/sys/unix"
)

// update is one job's news from its current node to its home node.
type update struct {
	ID string `json:"id"`
	// Node is where the job runs: the node sending the update.
	Node   string `json:"node,omitempty"`
	OutOff int64  `json:"out_off"`
	Out    []byte `json:"out,omitempty"`
	ErrOff int64  `json:"err_off"`
	Err    []byte `json:"err,omitempty"`
	// Exit, with the final sizes of both streams, once the job ended.
	Exit     *int  `json:"exit,omitempty"`
	FinalOut int64 `json:"final_out"`
	FinalErr int64 `json:"final_err"`
	// Why says why this node ended the job, when it did (a limit).
	Why string `json:"why,omitempty"`
	// Inc is the incarnation of the copy running here: news of an older
	// one than the home's record is refused, and that copy ended.
	Inc int `json:"inc,omitempty"`
	// Moves is the sequence number of the migration that brought the
	// copy here (job.Local.Moves). News sent before a move and delivered
	// after it (a request that stalled) is of a copy the home knows moved
	// on: it must not say where the job runs. News of a copy that moved
	// later than the home knows says where it runs now.
	// Absent from an older agent's update: then it is not judged.
	Moves *int `json:"moves,omitempty"`
}

// updateOverhead is about what an update without output takes in JSON.
const updateOverhead = 160

// ack is the home node's answer to an update.
type ack struct {
	Out  int64 `json:"out"`
	Err  int64 `json:"err"`
	Done bool  `json:"done"`
	// Gone: the home has no record of the job (a run that failed to start
	// everywhere and was taken back). Nobody can see or end it any more,
	// so its node ends it.
	Gone bool `json:"gone,omitempty"`
}

// ---- current node: push output and exit status home ----

func (a *Agent) kickPusher() {
	select {
	case a.jobs.kick <- struct{}{}:
	default:
	}
}

// pushLoop pushes news every pushEvery while jobs run here; with none it
// sleeps until a start kicks it, so an idle agent does not wake 20 times a
// second for nothing.
func (a *Agent) pushLoop() {
	defer a.wg.Done()
	t := time.NewTicker(pushEvery)
	defer t.Stop()
	for {
		tick := t.C
		if !a.hasLocalJobs() {
			tick = nil
		}
		select {
		case <-a.stop:
			return
		case <-tick:
		case <-a.jobs.kick:
		}
		a.pushOnce()
	}
}

func (a *Agent) hasLocalJobs() bool {
	a.jobs.mu.Lock()
	defer a.jobs.mu.Unlock()
	return len(a.jobs.local) > 0
}

// pushOnce sends every job's news to its home (this node or another). A
// home membership says is dead is left until it is back: its jobs run on
// and their output waits in their spool (home loss), and a call to it
// would hold up every other home's news until it timed out.
func (a *Agent) pushOnce() {
	for _, b := range a.pushBatches() {
		if !a.members.Reachable(b.home) {
			continue
		}
		var acks map[string]ack
		if err := a.peers.CallAddr(b.addr, http.MethodPost, peer.Updates, b.ups, &acks); err != nil {
			a.log.Debug("push to home", "home", b.home, "err", err)
			continue
		}
		a.applyAcks(acks)
	}
}

// homeBatch is news for one home node, sent in one request.
type homeBatch struct {
	home, addr string
	ups        []update
	size       int // bytes of output in ups
}

// pushBatches collects every job's news by home node, in batches of no
// more than pushBatch bytes of output (one job's news may be more). The
// job lock is held only to copy what each job's news needs and to note
// what was sent: the spools and /proc are read without it, so that a
// slow disk or thousands of jobs do not stop every request of the node.
func (a *Agent) pushBatches() []*homeBatch {
	now := time.Now()
	type item struct {
		id       string
		lj       *localJob
		st       newsState
		checkCap bool
		// Found without the lock.
		u      update
		send   bool
		killed string
	}
	var items []*item
	a.jobs.mu.Lock()
	for id, lj := range a.jobs.local {
		if lj.migrating {
			continue
		}
		it := &item{id: id, lj: lj, st: lj.newsState(), checkCap: lj.why == "" && now.Sub(lj.sizeChecked) >= time.Second}
		if it.checkCap {
			lj.sizeChecked = now
		}
		items = append(items, it)
	}
	a.jobs.mu.Unlock()

	for _, it := range items {
		if it.checkCap {
			if n := spoolSize(it.st.dir); n > a.cfg.Limits.OutputBytes {
				it.killed = fmt.Sprintf("killed: its output passed %s (limits.output_bytes)", api.Bytes(a.cfg.Limits.OutputBytes))
				a.log.Warn("job killed: output limit", "job", it.id, "bytes", n, "limit", a.cfg.Limits.OutputBytes)
			}
		}
		it.u, it.send = it.st.news(a.procs)
	}

	var out []*homeBatch
	last := map[string]*homeBatch{}
	a.jobs.mu.Lock()
	defer a.jobs.mu.Unlock()
	for _, it := range items {
		lj := it.lj
		// A job that began to migrate, or ended here, while its files
		// were read is left to the migration, or gone.
		if a.jobs.local[it.id] != lj || lj.migrating {
			continue
		}
		if it.killed != "" && lj.why == "" {
			lj.why = it.killed
			go a.procs.Kill(lj.rec.PID, lj.rec.StartTix, 5*time.Second)
		}
		u := it.u
		u.Why = lj.why
		if !it.send && now.Sub(lj.lastPush) < aliveEvery {
			continue
		}
		lj.lastPush = now
		moves := lj.rec.Moves
		u.ID, u.Node, u.Inc, u.Moves = it.id, a.cfg.NodeID, lj.rec.Inc, &moves
		// Each update costs its JSON besides its output: a heartbeat of
		// thousands of jobs must still fit a request.
		size := len(u.Out) + len(u.Err) + updateOverhead
		b := last[lj.rec.Home]
		if b == nil || b.size+size > pushBatch {
			b = &homeBatch{home: lj.rec.Home, addr: lj.rec.HomeAddr}
			last[lj.rec.Home] = b
			out = append(out, b)
		}
		b.ups = append(b.ups, u)
		b.size += size
	}
	return out
}

// newsState is what a job's news is read from: copied under the job
// lock, read without it.
type newsState struct {
	dir            string
	pid            int
	tix            uint64
	ackOut, ackErr int64
}

func (lj *localJob) newsState() newsState {
	return newsState{dir: lj.rec.Dir, pid: lj.rec.PID, tix: lj.rec.StartTix, ackOut: lj.ackOut, ackErr: lj.ackErr}
}

// news reads what the home does not have yet: the output past what it
// acknowledged, and the exit status once the job has ended. It does I/O
// and takes no lock.
func (st newsState) news(procs job.Processes) (update, bool) {
	if st.ackOut < 0 || st.ackErr < 0 {
		// After a restart: ask the home what it has first.
		return update{OutOff: -1, ErrOff: -1}, true
	}
	// Read the status before the output: output written before the exit
	// is then surely in the files we read next.
	code, ended := job.ReadStatus(st.dir)
	if !ended && !procs.Alive(st.pid, st.tix) {
		if code, ended = job.ReadStatus(st.dir); !ended {
			code, ended = 128+int(syscall.SIGKILL), true // killed before it could write
		}
	}
	out, _ := job.ReadSpool(st.dir, "stdout", st.ackOut, pushChunk)
	errb, _ := job.ReadSpool(st.dir, "stderr", st.ackErr, pushChunk)
	u := update{OutOff: st.ackOut, Out: out, ErrOff: st.ackErr, Err: errb}
	if ended && len(out) < pushChunk && len(errb) < pushChunk {
		u.Exit = &code
		u.FinalOut = st.ackOut + int64(len(out))
		u.FinalErr = st.ackErr + int64(len(errb))
	}
	return u, len(out) > 0 || len(errb) > 0 || u.Exit != nil
}

func (a *Agent) applyAcks(acks map[string]ack) {
	var gone []job.Local // the home has no record: killed if alive
	var dirs []string    // spools of jobs whose home has everything
	a.jobs.mu.Lock()
	for id, k := range acks {
		lj := a.jobs.local[id]
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
			delete(a.jobs.local, id)
			_ = a.store.DeleteLocal(id)
			dirs = append(dirs, lj.rec.Dir)
		}
	}
	a.jobs.mu.Unlock()
	if len(dirs) > 0 {
		a.kickLoad()
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
	out := map[string]ack{}
	var events []api.Event
	// Recorded once the lock is let go, and only when the records are
	// written (events is cleared when they are not).
	defer func() {
		for _, e := range events {
			a.event(e)
		}
	}()

	// The output first, without the job lock: each job's home spool is
	// written under a lock of its own, so that two pushes of one job
	// (a migration's last one and the push loop's) append in turn. A job
	// this node has no record of gets nothing written.
	a.jobs.mu.Lock()
	known := map[string]bool{}
	stale := map[string]bool{} // news of a copy of an older incarnation
	for _, u := range ups {
		r := a.jobs.home[u.ID]
		known[u.ID] = r != nil
		stale[u.ID] = r != nil && u.Inc < r.Inc
	}
	a.jobs.mu.Unlock()
	type sizes struct{ out, err int64 }
	got := make([]sizes, len(ups))
	for i, u := range ups {
		if !known[u.ID] || stale[u.ID] {
			continue
		}
		no, ne := u.OutOff, u.ErrOff
		if len(u.Out) > 0 || no < 0 || len(u.Err) > 0 || ne < 0 {
			mu := a.jobs.spoolLock(u.ID)
			mu.Lock()
			if inc, ok := a.jobs.incs.Load(u.ID); ok && u.Inc < inc.(int) {
				mu.Unlock() // restarted since: its cut spool is the new copy's
				continue
			}
			dir := a.homeSpool(u.ID)
			if len(u.Out) > 0 || no < 0 {
				no = appendAt(filepath.Join(dir, "stdout"), u.OutOff, u.Out)
			}
			if len(u.Err) > 0 || ne < 0 {
				ne = appendAt(filepath.Join(dir, "stderr"), u.ErrOff, u.Err)
			}
			mu.Unlock()
		}
		got[i] = sizes{no, ne}
	}

	a.jobs.mu.Lock()
	next := map[string]*job.Record{} // changed copies of records
	var done []string
	// the periodic checkpoints of the jobs that ended, no longer needed
	var kept []api.Checkpoint
	var keptOf []string
	for i, u := range ups {
		rec := next[u.ID]
		if rec == nil {
			cur := a.jobs.home[u.ID]
			if cur == nil || !known[u.ID] {
				// Forgotten after a failed start: nobody will read it.
				// Only a job's home can say it has no record of it; news
				// that reached another node (a stale home address) is
				// dropped, not ended. A job purged while its output was
				// written is gone as well.
				h, _ := homeOf(u.ID)
				out[u.ID] = ack{Done: true, Gone: h == a.cfg.NodeID}
				continue
			}
			if stale[u.ID] || u.Inc < cur.Inc {
				// A copy of an incarnation before the job's restart from
				// a checkpoint (its node was cut off, not dead): it is
				// ended, and nothing it says is taken.
				a.log.Warn("news of an old copy refused: its node ends it", "job", u.ID, "node", u.Node, "inc", u.Inc, "current", cur.Inc)
				out[u.ID] = ack{Done: true, Gone: true}
				continue
			}
			c := *cur
			rec = &c
		}
		changed := false
		// An older agent's update names no node: the job runs where the
		// record last put it.
		node := u.Node
		if node == "" {
			node = rec.Node
		}
		switch {
		case u.Moves != nil && *u.Moves < rec.Migrations:
			// Sent before the job moved on, delivered after: its output
			// is taken (by offset), where it ran is not news.
		case u.Moves != nil && *u.Moves > rec.Migrations && u.Node != "" && rec.State != job.StateFinished:
			// A move the home has no note of yet committed: the job runs
			// there now (migrate.ApplyNote's rule, from the copy itself),
			// and is back if it was lost.
			if e, ok := revive(rec, u.Node); ok {
				events = append(events, e)
			}
			rec.Node, rec.Migrations = u.Node, *u.Moves
			changed = true
		default:
			if e, ok := revive(rec, node); ok {
				events = append(events, e)
				changed = true
			}
		}
		// Kept for the nodes jobs run on only, so it stays as small as the
		// table's list of nodes.
		if u.Node != "" && u.Node == rec.Node {
			a.jobs.heard[u.Node] = time.Now()
		}
		no, ne := got[i].out, got[i].err
		if u.Why != "" && rec.EndReason == "" && !rec.Over() {
			rec.EndReason = limitText(u.Why)
			changed = true
		}
		over := rec.Over()
		if !over && u.Exit != nil && no == u.FinalOut && ne == u.FinalErr {
			code := *u.Exit
			rec.State, rec.ExitCode, rec.Ended = job.StateFinished, &code, time.Now()
			changed = true
			over = true
			if rec.Newest != nil {
				kept = append(kept, *rec.Newest)
				keptOf = append(keptOf, u.ID)
			}
		}
		if changed {
			next[u.ID] = rec // a copy taken from next is there already
		}
		if over {
			done = append(done, u.ID)
		}
		out[u.ID] = ack{Out: no, Err: ne, Done: over}
	}
	if len(next) > 0 {
		recs := make([]job.Record, 0, len(next))
		for _, r := range next {
			recs = append(recs, *r)
		}
		if err := a.store.PutRecords(recs...); err != nil {
			a.jobs.mu.Unlock()
			a.log.Error("job table: updates not taken", "err", err)
			events = nil
			return nil, errkind.New(peer.ErrUnavailable, "job table of node %s: %v", a.cfg.NodeID, err)
		}
		for id, r := range next {
			*a.jobs.home[id] = *r
		}
	}
	for _, u := range ups {
		a.jobs.wakeReaders(u.ID)
	}
	a.jobs.mu.Unlock()

	for i, c := range kept {
		a.dropCheckpointOn(c.StoredOn, keptOf[i], time.Time{})
	}
	// An ended job no longer loads the node this one moved it to.
	for _, id := range done {
		a.rounds.Ended(id)
	}
	// A job's end is acknowledged only once its output is on disk at its
	// home; the sync, too, runs without the job lock.
	for _, id := range done {
		if err := syncSpool(a.homeSpool(id)); err != nil {
			a.log.Error("home spool: sync", "job", id, "err", err)
			k := out[id]
			k.Done = false // the node keeps its copy and sends again
			out[id] = k
		}
	}
	return out, nil
}

// syncSpool makes a job's output at its home durable.
func syncSpool(dir string) error {
	for _, n := range []string{"stdout", "stderr"} {
		f, err := os.Open(filepath.Join(dir, n))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// appendAt appends the part of data past the file's end, when data starts
// at or before it, and returns the file's size.
func appendAt(path string, off int64, data []byte) int64 {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0
	}
	size := fi.Size()
	if off >= 0 && off <= size && off+int64(len(data)) > size {
		n, _ := f.Write(data[size-off:])
		size += int64(n)
	}
	return size
}

// Output returns a home job's output from the given offsets, waiting up to
// wait for news when there is none.
func (a *Agent) Output(id string, outOff, errOff int64, wait time.Duration) (api.Output, error) {
	deadline := time.Now().Add(min(wait, maxWait))
	for {
		a.jobs.mu.Lock()
		rec := a.jobs.home[id]
		if rec == nil {
			a.jobs.mu.Unlock()
			return api.Output{}, errkind.New(peer.ErrNotFound, "unknown job %s", id)
		}
		r := *rec
		ch := a.jobs.wake[id]
		if ch == nil {
			ch = make(chan struct{})
			a.jobs.wake[id] = ch
		}
		a.jobs.mu.Unlock()

		o := api.Output{ID: id, State: r.State, Ended: r.Over(), ExitCode: r.ExitCode, Node: r.Node, LostAt: r.LostAt, Inc: r.Inc}
		if n := len(r.Restarts); n > 0 {
			o.Restart = &r.Restarts[n-1]
		}
		o.Stdout, _ = job.ReadSpool(a.homeSpool(id), "stdout", outOff, outputChunk)
		o.Stderr, _ = job.ReadSpool(a.homeSpool(id), "stderr", errOff, outputChunk)
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
	lj, movedTo := a.settledLocal(id)
	if movedTo != "" {
		return a.stdinOn(movedTo, id, data, eof)
	}
	a.jobs.mu.Lock()
	defer a.jobs.mu.Unlock()
	if lj == nil || lj.stdin == nil {
		return api.StdinResult{}, errkind.New(peer.ErrNotFound, "job %s takes no stdin here", id)
	}
	// What the pipe takes now, and no more: a job that does not read its
	// stdin holds no buffer and no goroutine of the agent's, whatever is
	// sent to it. The pipe's contents move with the job.
	n, err := writeNow(lj.stdin, data)
	if err != nil {
		return api.StdinResult{Accepted: n}, errkind.New(peer.ErrUnavailable, "stdin of job %s: %v", id, err)
	}
	if eof && n == len(data) {
		lj.stdin.Close()
		lj.stdin = nil
	}
	return api.StdinResult{Accepted: n}, nil
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

// spoolSize is what a job has written to its spool.
func spoolSize(dir string) int64 {
	var n int64
	for _, f := range []string{"stdout", "stderr"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// limitText bounds a reason from the network before a record keeps it.
func limitText(s string) string {
	if len(s) > 200 {
		s = s[:200]
	}
	return strings.ToValidUTF8(s, "?")
}
