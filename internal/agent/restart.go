package agent

// Restarts from a checkpoint: `roam restart FILE`, and a home restarting a
// job whose node membership declared dead from the job's newest periodic
// checkpoint.
//
// Never two copies: a restart needs the home's consent ("reopen"), which
// it gives only to a job that does not run (ended, lost, or running on a
// node declared dead), and which raises the job's incarnation (Inc) in
// its record before any copy is restored. From then on the home takes
// news only of the new incarnation: a copy of an older one (the old node
// was cut off, not dead, and comes back) gets "gone" at its first push,
// so its node kills it, and its output and exit status are dropped
// (relay.go). The home cuts its copy of the output back to the
// checkpoint's offsets: the restored job writes on from there.

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/asuser"
	"roam/internal/ckpt"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/migrate"
)

// reopenRequest is /v1/peer/reopen: may this job run again from this
// checkpoint, and where?
type reopenRequest struct {
	ID    string                 `json:"id"`
	Meta  migrate.CheckpointMeta `json:"meta"`
	Owner asuser.Cred            `json:"owner"`
	Every time.Duration          `json:"every,omitempty"`
	// On is the node asked for (roam restart --on); "" is the best one.
	On  string `json:"on,omitempty"`
	Why string `json:"why"`
	// Lost is the node membership declared dead that ran it (a home's own
	// restart): the record may still say it runs there.
	Lost string `json:"lost,omitempty"`
}

// reopened is the home's consent: the job, maybe under a new id, runs
// again as incarnation Inc on Node.
type reopened struct {
	ID       string `json:"id"`
	Node     string `json:"node"`
	Inc      int    `json:"inc"`
	Home     string `json:"home"`
	HomeAddr string `json:"home_addr"`
	Moves    int    `json:"moves"`
}

// reopenDone is /v1/peer/reopen/done: how the restore went.
type reopenDone struct {
	ID  string `json:"id"`
	Inc int    `json:"inc"`
	OK  bool   `json:"ok"`
	// Failed: the node answered that nothing runs there (the record goes
	// back to what it was); else the restore may have happened.
	Failed bool   `json:"failed,omitempty"`
	Error  string `json:"error,omitempty"`
}

// Restart is `roam restart`: the checkpoint file from the CLI, read from
// body, runs again as its job.
func (a *Agent) Restart(c Caller, on string, body io.Reader, length int64) (api.RestartResponse, error) {
	if length <= 0 {
		return api.RestartResponse{}, errkind.New(peer.ErrBadRequest, "restart: the checkpoint's length must be given (Content-Length)")
	}
	// One upload at a time per user: each holds a file on root's disk
	// until it is checked.
	if !a.jobs.beginUpload(c.UID) {
		return api.RestartResponse{}, errkind.New(peer.ErrBadRequest, "restart: uid %d has another restart in progress", c.UID)
	}
	defer a.jobs.endUpload(c.UID)
	f, err := a.keeper.Take(body, length, newMID())
	if err != nil {
		return api.RestartResponse{}, err
	}
	s := fromFile(f)
	defer os.Remove(s.path)
	if !canTouch(c, s.hdr.UID) {
		return api.RestartResponse{}, errkind.New(peer.ErrPermission, "checkpoint of job %s (uid %d): permission denied", s.hdr.ID, s.hdr.UID)
	}
	// It runs again with the groups the caller has now, not those it had
	// when it was saved: a user removed from a group does not get it back.
	if c.UID != 0 {
		for _, g := range append([]uint32{s.hdr.GID}, s.hdr.Groups...) {
			if g != c.GID && !slices.Contains(c.Groups, g) {
				return api.RestartResponse{}, errkind.New(peer.ErrPermission, "checkpoint of job %s runs with group %d, which uid %d is no longer in", s.hdr.ID, g, c.UID)
			}
		}
	}
	home := s.hdr.Home
	if p, ok := a.members.Get(home); !ok {
		// Another cluster's (same secret): this node is its home now.
		home = a.cfg.NodeID
	} else if !p.Alive {
		return api.RestartResponse{}, errkind.New(peer.ErrUnavailable, "node %s, the home of job %s, is not alive", home, s.hdr.ID)
	}
	req := reopenRequest{ID: s.hdr.ID, Meta: s.meta, Owner: asuser.Cred{UID: s.hdr.UID, GID: s.hdr.GID, Groups: s.hdr.Groups},
		Every: s.hdr.CheckpointEvery, On: on, Why: "roam restart"}
	var ans reopened
	if err := a.peers.Call(home, http.MethodPost, peer.Reopen, req, &ans); err != nil {
		return api.RestartResponse{}, err
	}
	if err := a.restoreOn(s, ans); err != nil {
		return api.RestartResponse{}, err
	}
	return api.RestartResponse{ID: ans.ID, Node: ans.Node, Inc: ans.Inc}, nil
}

// restoreOn restores a checkpoint file of this node as the job ans names
// on ans.Node, and tells the home how it went.
func (a *Agent) restoreOn(s savedCkpt, ans reopened) error {
	var err error
	if ans.Node == a.cfg.NodeID {
		err = a.restoreLocal(s, ans)
	} else {
		q := url.Values{"id": {ans.ID}, "inc": {strconv.Itoa(ans.Inc)}, "home": {ans.Home}, "home_addr": {ans.HomeAddr}, "moves": {strconv.Itoa(ans.Moves)}}
		err = a.sendFile(ans.Node, peer.Restore+"?"+q.Encode(), s.path, s.size, nil)
	}
	d := reopenDone{ID: ans.ID, Inc: ans.Inc, OK: err == nil}
	if err != nil {
		d.Error = err.Error()
		// The node answered: it killed whatever it restored. A call that
		// broke off may have restored it: the record stays, and the copy
		// is taken back by its first push if it runs.
		d.Failed = !errors.Is(err, peer.ErrUnavailable)
	}
	if nerr := retry(func() error { return a.peers.Call(ans.Home, http.MethodPost, peer.ReopenDone, d, nil) }); nerr != nil {
		a.log.Warn("restart: home not told", "job", ans.ID, "home", ans.Home, "err", nerr)
	}
	return err
}

// reopen is the home's side: it checks that the job does not run, picks
// its node and makes its record say it runs there, as a new incarnation,
// its output cut back to the checkpoint's.
func (a *Agent) reopen(req reopenRequest) (reopened, error) {
	if h, ok := homeOf(req.ID); !ok {
		return reopened{}, errkind.New(peer.ErrBadRequest, "job id %q", req.ID)
	} else if h != a.cfg.NodeID && a.members.Known(h) {
		return reopened{}, errkind.New(peer.ErrBadRequest, "job %s has its home on node %s, not here", req.ID, h)
	}
	if err := req.Meta.Validate(); err != nil {
		return reopened{}, errkind.New(peer.ErrBadRequest, "%v", err)
	}
	if len(req.Owner.Groups) > migrate.MaxGroups {
		return reopened{}, errkind.New(peer.ErrBadRequest, "%d supplementary groups", len(req.Owner.Groups))
	}
	if !migrate.ValidEvery(req.Every) {
		return reopened{}, errkind.New(peer.ErrBadRequest, "checkpoint interval %v", req.Every)
	}
	targets, _, err := a.members.Place(req.On, 1, a.draining.Load())
	if err != nil {
		return reopened{}, err
	}
	if len(targets) == 0 || targets[0] == req.Lost {
		return reopened{}, errkind.New(peer.ErrUnavailable, "no live node to restart job %s on", req.ID)
	}
	target := targets[0]
	id, had, err := a.jobs.restartID(req, a.cfg.NodeID)
	if err != nil {
		return reopened{}, err
	}
	fresh := id == "" // a new id, which no record may hold
	if fresh {
		seq, err := a.store.NextSeqs(1)
		if err != nil {
			return reopened{}, err
		}
		id = fmt.Sprintf("%s.%d", a.cfg.NodeID, seq)
	} else if !had {
		_, seq, _ := jobSeq(id)
		if err := a.store.BumpSeq(seq); err != nil {
			return reopened{}, err
		}
	}
	now := time.Now()
	next, err := a.jobs.reopen(req, id, fresh, had, target, a.cfg.NodeID, now)
	if err != nil {
		return reopened{}, err
	}
	uid := next.UID
	go a.event(api.Event{At: now, Kind: "restart", Job: id, UID: &uid, From: req.Meta.Node, To: target,
		Why: fmt.Sprintf("%s, from the checkpoint of %s", req.Why, req.Meta.At.Format(time.RFC3339))})
	return reopened{ID: id, Node: target, Inc: next.Inc, Home: a.cfg.NodeID, HomeAddr: a.peers.SelfAddr, Moves: next.Migrations}, nil
}

// reopenEnded is the home taking the end of a restore: a failed one puts
// the record back as it was before (when nothing changed it since).
func (a *Agent) reopenEnded(d reopenDone) error {
	if !d.OK && d.Error != "" {
		a.log.Warn("restart failed", "job", d.ID, "err", d.Error)
	}
	return a.jobs.reopenEnded(d, time.Now())
}

// serveRestore is /v1/peer/restore: a checkpoint file to restore here as
// the job the query names (the home consented).
func (a *Agent) serveRestore(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	ans := reopened{ID: q.Get("id"), Node: a.cfg.NodeID, Home: q.Get("home"), HomeAddr: q.Get("home_addr")}
	var err1, err2 error
	ans.Inc, err1 = strconv.Atoi(q.Get("inc"))
	ans.Moves, err2 = strconv.Atoi(q.Get("moves"))
	_, err3 := netip.ParseAddrPort(ans.HomeAddr)
	if h, ok := homeOf(ans.ID); !ok || h != ans.Home || err1 != nil || err2 != nil || err3 != nil || ans.Inc < 1 || ans.Moves < 0 {
		writeError(w, errkind.New(peer.ErrBadRequest, "restore of job %q: bad query", ans.ID))
		return
	}
	body, stop := watchedBody(w, r)
	f, err := a.keeper.Take(body, r.ContentLength, newMID())
	stop()
	if err == nil {
		err = a.restoreLocal(fromFile(f), ans)
		os.Remove(f.Path)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

// restoreLocal restores a checked checkpoint file here as job ans.ID,
// incarnation ans.Inc, and lets it run. On any error nothing of it runs
// here.
func (a *Agent) restoreLocal(s savedCkpt, ans reopened) error {
	hdr := s.hdr
	if err := a.notHere(ans.ID, ""); err != nil {
		return err
	}
	if !a.jobs.beginRestore(ans.ID) {
		return errkind.New(peer.ErrBadRequest, "job %s is being restored on node %s already", ans.ID, a.cfg.NodeID)
	}
	defer a.jobs.endRestore(ans.ID)
	spool := a.procs.SpoolDir(ans.ID)
	images := filepath.Join(a.imageDir, "restart-"+newMID())
	os.RemoveAll(spool)
	defer os.RemoveAll(images)
	for _, d := range []string{spool, images} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return err
		}
	}
	fail := func(err error) error {
		os.RemoveAll(spool)
		return err
	}
	f, err := os.Open(s.path)
	if err != nil {
		return fail(err)
	}
	br := bufio.NewReaderSize(io.NewSectionReader(f, 0, s.size-migrate.SealSize), 1<<20)
	if _, _, err = migrate.ReadCheckpoint(br); err == nil {
		err = readArchive(br, images, spool)
	}
	f.Close()
	if err != nil {
		return fail(err)
	}
	inherit := map[string]*os.File{}
	if hdr.StdinKey != "" {
		// The user's stdin is not there any more: the job reads its end.
		pr, pw, err := os.Pipe()
		if err != nil {
			return fail(err)
		}
		pw.Close()
		defer pr.Close()
		inherit[hdr.StdinKey] = pr
	}
	// The files, as the owner and without symlinks, right before CRIU
	// reopens them as root.
	owner := asuser.Cred{UID: hdr.UID, GID: hdr.GID, Groups: hdr.Groups}
	found, err := a.checkFiles(&owner, s.meta.Files)
	if err != nil {
		return fail(err)
	}
	mounts := map[string]string{ckpt.JobDir: spool}
	for _, mp := range hdr.Mounts {
		if mp != ckpt.JobDir {
			mounts[mp] = mp
		}
	}
	check := a.restoredCheck(owner, found, "refused")
	pid, _, err := a.ckpt.Restore(ckpt.RestoreSpec{ID: ans.ID, Dir: images, Mounts: mounts, Inherit: inherit, Check: check})
	if err != nil {
		if pid > 0 {
			a.procs.Kill(pid, a.procs.StartTicks(pid), 5*time.Second)
		}
		return fail(fmt.Errorf("restore of job %s on node %s: %w", ans.ID, a.cfg.NodeID, err))
	}
	tix := a.procs.StartTicks(pid)
	l := job.Local{ID: ans.ID, Home: ans.Home, HomeAddr: ans.HomeAddr, UID: hdr.UID, GID: hdr.GID, Groups: hdr.Groups,
		PID: pid, StartTix: tix, Dir: spool, Started: hdr.Started, Hold: hdr.Hold, Moves: ans.Moves, LastMoved: time.Now(),
		Inc: ans.Inc, CheckpointEvery: hdr.CheckpointEvery, CPUBefore: hdr.CPUBefore, CPUBase: a.cpuHere(ans.ID, pid)}
	if err := a.store.PutLocals(l); err != nil {
		a.procs.Kill(pid, tix, 5*time.Second)
		return fail(err)
	}
	a.jobs.mu.Lock()
	if old := a.jobs.local[l.ID]; old != nil {
		a.jobs.mu.Unlock()
		a.procs.Kill(pid, tix, 5*time.Second)
		return fail(errkind.New(peer.ErrBadRequest, "job %s runs on node %s already", l.ID, a.cfg.NodeID))
	}
	a.jobs.local[l.ID] = &localJob{rec: l, ackOut: -1, ackErr: -1, arrivedAt: time.Now()}
	a.migr.Back(l.ID)
	a.jobs.mu.Unlock()
	a.ckpt.Thaw(pid, hdr.Stopped)
	a.jobs.kickPush()
	a.log.Info("job restarted from a checkpoint", "job", l.ID, "inc", l.Inc, "checkpoint_at", s.meta.At, "from", s.meta.Node)
	return nil
}

// ---- a home restarting the jobs of a dead node ----

// restartable says whether a job on a node taken for dead can be
// restarted from its newest checkpoint: there is one, and the node that
// keeps it is not dead too.
func restartable(newest *api.Checkpoint, node string, dead func(string) bool) bool {
	return newest != nil && newest.OK && newest.StoredOn != "" && newest.StoredOn != node && !dead(newest.StoredOn)
}

// answers says whether node answers this agent on the peer port now.
// Membership can take a live node for dead for a moment: when a partition
// heals, a node that was cut off may still gossip the deaths it saw; the
// node refutes it, but a sweep in between would restart its jobs. A node
// that answers is not restarted from.
func (a *Agent) answers(node string) bool {
	var out struct {
		Node string `json:"node"`
	}
	err := a.peers.CallWithin(pingTimeout, node, http.MethodGet, peer.Ping, nil, &out)
	return err == nil && out.Node == node
}

// pingTimeout bounds answers: a node cut off does not answer at all.
const pingTimeout = time.Second

// restartLost restarts job id, which ran on the dead node lost, from its
// newest checkpoint, kept on store.
func (a *Agent) restartLost(rec job.Record, lost string) {
	if a.members.Alive(lost) || a.answers(lost) {
		return // it answers again: its copy runs on (the next sweep sees)
	}
	store := rec.Newest.StoredOn
	req := reopenRequest{ID: rec.ID, Owner: asuser.Cred{UID: rec.UID, GID: rec.GID, Groups: rec.Groups}, Every: rec.CheckpointEvery,
		Lost: lost, Why: fmt.Sprintf("node %s was declared dead", lost),
		Meta: migrate.CheckpointMeta{Version: migrate.CheckpointVersion, At: rec.Newest.At, Node: rec.Newest.Node, Out: rec.Newest.Out, Err: rec.Newest.Err,
			Job: migrate.CheckpointJob{User: rec.User, Argv: rec.Argv, Env: rec.Env, Cwd: rec.Cwd, Pin: rec.Pin, Group: rec.Group, Started: rec.Started}}}
	ans, err := a.reopen(req)
	if err != nil {
		a.log.Warn("restart after node loss: not restarted", "job", rec.ID, "err", err)
		a.markLost(rec.ID, lost)
		return
	}
	a.log.Info("restarting a job of a dead node", "job", rec.ID, "dead", lost, "on", ans.Node, "checkpoint_at", rec.Newest.At, "kept_on", store)
	if store == a.cfg.NodeID {
		err = a.restoreStored(ans)
	} else {
		err = a.peers.CallWithin(migrateTimeout, store, http.MethodPost, peer.CkptRestore, ans, nil)
		if err != nil {
			// The store answers after it told this home (restoreOn); a
			// store that could not even start tells nothing.
			_ = a.reopenEnded(reopenDone{ID: ans.ID, Inc: ans.Inc, Failed: !errors.Is(err, peer.ErrUnavailable), Error: err.Error()})
		}
	}
	if err != nil {
		a.log.Warn("restart after node loss failed", "job", rec.ID, "err", err)
	}
}

// restoreStored restores the checkpoint this node keeps of ans.ID as the
// home consented in ans.
func (a *Agent) restoreStored(ans reopened) error {
	// A link of its own: a newer file kept meanwhile replaces the name,
	// not what is checked and restored.
	f, err := a.keeper.Open(ans.ID, newMID(), a.cfg.NodeID)
	if err == nil {
		defer os.Remove(f.Path)
	}
	if err != nil {
		_ = a.peers.Call(ans.Home, http.MethodPost, peer.ReopenDone, reopenDone{ID: ans.ID, Inc: ans.Inc, Failed: true, Error: err.Error()}, nil)
		return err
	}
	return a.restoreOn(fromFile(f), ans)
}

// markLost marks job id lost with node, if its record still says it runs
// there.
func (a *Agent) markLost(id, node string) {
	uid, marked, err := a.jobs.markLostOn(id, node, time.Now())
	if err != nil {
		a.log.Error("job table", "err", err)
	}
	if marked {
		a.event(api.Event{Kind: "lost", Job: id, UID: &uid, From: node, Why: "its node was declared dead"})
	}
}
