package agent

// Checkpoints: `roam checkpoint` saves a running job into a sealed file
// (format in package migrate) that its owner gets; `roam run
// --checkpoint-every` has the node running a job save it periodically and
// keep the newest on another node (its home, or, for a job running at its
// home, another live node), so that losing the running node does not lose
// it. Restarts are in restart.go.

import (
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"roam/internal/agent/keeper"
	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/asuser"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/migrate"
)

// savedCkpt is a checkpoint file this node wrote or took, root's.
type savedCkpt struct {
	path string
	size int64
	meta migrate.CheckpointMeta
	hdr  migrate.Header
	// stop, for roam checkpoint --stop, ends the job (still frozen) once
	// its file was delivered, or thaws it when it was not.
	stop func(delivered bool)
}

// fromFile is a checked file of the keeper's as the agent holds it.
func fromFile(f keeper.File) savedCkpt {
	return savedCkpt{path: f.Path, size: f.Size, meta: f.Meta, hdr: f.Hdr}
}

// ckptKey seals and checks checkpoint files: parts' key, or one derived
// from the gossip key.
func ckptKey(parts Parts) []byte {
	if len(parts.CheckpointKey) > 0 {
		return parts.CheckpointKey
	}
	k := sha256.Sum256(append([]byte("roam checkpoint "), parts.GossipKey...))
	return k[:]
}

// checkpointLocal saves job id, running here, into a sealed checkpoint
// file in the image directory, which the caller removes. The job is
// frozen for CRIU's dump only, then runs on; with stop it is ended
// instead (its record says why).
func (a *Agent) checkpointLocal(id string, stop bool) (savedCkpt, error) {
	if _, err := a.claimForMigration(id); err != nil {
		return savedCkpt{}, err
	}
	rec, cj, hasStdin, _ := a.jobs.ckptOf(id) // claimed: it stays
	release := func() {
		a.jobs.release(id, rec.PID)
		a.jobs.kickPush()
	}
	held := false // by a stop left to the caller
	defer func() {
		if !held {
			release()
		}
	}()
	if cj == nil {
		// What the job's record holds that this node does not: asked of
		// its home once (it never changes).
		var r job.Record
		if err := a.peers.Call(rec.Home, http.MethodGet, peer.Record+"?id="+url.QueryEscape(id), nil, &r); err != nil {
			return savedCkpt{}, fmt.Errorf("job %s: its record at its home %s: %w", id, rec.Home, err)
		}
		cj = &migrate.CheckpointJob{User: r.User, Argv: r.Argv, Env: r.Env, Cwd: r.Cwd, Pin: r.Pin, Group: r.Group, Started: r.Started}
		a.jobs.setCkptJob(id, cj)
	}
	v, err := a.movable(rec.PID, &asuser.Cred{UID: rec.UID, GID: rec.GID, Groups: rec.Groups})
	if err != nil {
		return savedCkpt{}, err
	}
	if v.Pin != "" {
		return savedCkpt{}, errkind.New(peer.ErrPinned, "job %s cannot be checkpointed: %s", id, v.Pin)
	}
	mounts, err := a.ckpt.Mounts(rec.PID)
	if err != nil {
		return savedCkpt{}, err
	}
	dir := filepath.Join(a.imageDir, "ckpt-"+newMID())
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return savedCkpt{}, err
	}
	defer os.RemoveAll(dir)
	frozen := time.Now()
	thaw := func() {
		if a.procs.Alive(rec.PID, rec.StartTix) {
			a.ckpt.Thaw(rec.PID, v.Stopped)
		}
	}
	if err := a.ckpt.Checkpoint(rec.PID, dir, mounts); err != nil {
		thaw()
		return savedCkpt{}, fmt.Errorf("checkpoint of job %s: %w", id, err)
	}
	// Judged again frozen, as a migration does: a lock taken since would
	// make the restore wait for it.
	fv := a.ckpt.Inspect(rec.PID, a.members.IPs(), true)
	if fv.Pin != "" {
		thaw()
		return savedCkpt{}, errkind.New(peer.ErrPinned, "job %s cannot be checkpointed, once frozen: %s", id, fv.Pin)
	}
	// The file goes to the job's owner: every task in it, as frozen (a
	// set-id program started since the first look included), must run
	// as the owner and be dumpable, or the images would hold memory the
	// owner could not read.
	tasks, err := a.ckpt.Creds(rec.PID)
	if err == nil {
		err = migrate.CheckCheckpointable(rec.UID, rec.GID, rec.Groups, rec.PID, tasks)
	}
	if err != nil {
		thaw()
		return savedCkpt{}, errkind.New(peer.ErrBadRequest, "job %s cannot be checkpointed, once frozen: %v", id, err)
	}
	// The spool's sizes now are where the output goes on after a
	// restart; the files are read later, up to these sizes.
	files, err := streamFiles(dir, rec.Dir)
	if err != nil {
		thaw()
		return savedCkpt{}, err
	}
	// The frozen job's files, as the images have them: a restart checks
	// these, and then the restored job holds exactly them (a file opened
	// between the first look and the freeze would be refused there).
	meta := migrate.CheckpointMeta{At: frozen, Node: a.cfg.NodeID, Files: fv.Files, Job: *cj}
	for _, f := range files {
		switch f.Name {
		case migrate.DirSpool + "/stdout":
			meta.Out = f.Size
		case migrate.DirSpool + "/stderr":
			meta.Err = f.Size
		}
	}
	hdr := migrate.Header{MID: newMID(), From: a.cfg.NodeID, ID: id, Home: rec.Home, HomeAddr: rec.HomeAddr, Mounts: mounts,
		UID: rec.UID, GID: rec.GID, Groups: rec.Groups, Started: rec.Started, Hold: rec.Hold,
		Moves: rec.Moves, LastMoved: rec.LastMoved, Stopped: v.Stopped, Inc: rec.Inc, CheckpointEvery: rec.CheckpointEvery,
		CPUBefore: a.attained(rec)}
	if hasStdin {
		hdr.StdinKey = a.procs.StdinKey(rec.PID)
	}
	if !stop {
		thaw()
	}
	meta.FreezeMS = msSince(frozen)
	// With stop, the job stays frozen until its file is delivered: a
	// failure on the way thaws it, never loses it.
	fail := func(err error) (savedCkpt, error) {
		if stop {
			thaw()
		}
		return savedCkpt{}, err
	}
	plan, err := migrate.NewPlan(hdr, files)
	if err != nil {
		return fail(err)
	}
	cp, err := migrate.NewCheckpointPlan(meta, plan)
	if err != nil {
		return fail(err)
	}
	// On the state directory's disk, as the kept ones (a rename moves
	// it there), not on the images' tmpfs.
	path, err := a.keeper.NewPath("ckpt", hdr.MID)
	if err != nil {
		return fail(err)
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return fail(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	err = cp.Write(bw, a.keeper.Key(), openFile)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return fail(fmt.Errorf("checkpoint file: %w", err))
	}
	s := savedCkpt{path: path, size: cp.Size(), meta: meta, hdr: hdr}
	if stop {
		held = true
		s.stop = func(delivered bool) {
			defer release()
			if !delivered {
				thaw()
				return
			}
			a.jobs.endedHere(id, "stopped once checkpointed (roam checkpoint --stop); roam restart continues it")
			a.procs.Kill(rec.PID, rec.StartTix, 30*time.Second)
		}
	}
	return s, nil
}

// Checkpoint is `roam checkpoint`: it saves the caller's running job and
// writes the sealed file to w (the CLI writes it, as the user, where the
// user said).
func (a *Agent) Checkpoint(c Caller, req api.CheckpointRequest, w http.ResponseWriter) error {
	rec, err := a.record(req.ID)
	if err != nil {
		return err
	}
	if !canTouch(c, rec.UID) {
		return errkind.New(peer.ErrPermission, "%s: permission denied", req.ID)
	}
	if rec.State != api.StateRunning {
		return errkind.New(peer.ErrBadRequest, "%s: job is %s, not running", rec.ID, rec.State)
	}
	if rec.Node == a.cfg.NodeID {
		s, err := a.checkpointLocal(req.ID, req.Stop)
		if err != nil {
			return err
		}
		defer os.Remove(s.path)
		a.noteCheckpoint(rec.Home, req.ID, rec.Inc, s, "", nil)
		err = serveFile(w, s.path, s.size)
		if s.stop != nil {
			s.stop(err == nil)
		}
		return nil // the answer has begun: nothing more can be said
	}
	addr, err := a.members.PeerAddr(rec.Node)
	if err != nil {
		return err
	}
	body, err := api.JSONBody(checkpointRequest{ID: req.ID, Stop: req.Stop})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), migrateTimeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+peer.CkptTake, body)
	if err != nil {
		return err
	}
	resp, err := a.peers.HTTP.Do(hreq)
	if err != nil {
		return errkind.New(peer.ErrUnavailable, "node %s: %v", rec.Node, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return peer.Err(api.Exchange(&http.Client{Transport: api.Answered(resp)}, hreq, nil))
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	if resp.ContentLength >= 0 {
		w.Header().Set("Content-Length", fmt.Sprint(resp.ContentLength))
	}
	w.WriteHeader(http.StatusOK)
	_, _ = io.Copy(w, resp.Body)
	return nil
}

// checkpointRequest is peer.CkptTake: save a job running here and
// answer with the file.
type checkpointRequest struct {
	ID   string `json:"id"`
	Stop bool   `json:"stop,omitempty"`
}

// servePeerCheckpoint is peer.CkptTake.
func (a *Agent) servePeerCheckpoint(w http.ResponseWriter, r *http.Request) {
	var req checkpointRequest
	if err := decode(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if _, ok := migrate.JobHome(req.ID); !ok {
		writeError(w, errkind.New(peer.ErrBadRequest, "job id %q", req.ID))
		return
	}
	s, err := a.checkpointLocal(req.ID, req.Stop)
	if err != nil {
		writeError(w, err)
		return
	}
	defer os.Remove(s.path)
	a.noteCheckpoint(s.hdr.Home, req.ID, s.hdr.Inc, s, "", nil)
	err = serveFile(w, s.path, s.size)
	if s.stop != nil {
		s.stop(err == nil)
	}
}

// serveFile answers with a file's bytes.
func serveFile(w http.ResponseWriter, path string, size int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", fmt.Sprint(size))
	w.WriteHeader(http.StatusOK)
	// A reader that stops reading for stallTimeout is cut off: the file
	// (and, with --stop, the frozen job) is not held for it.
	rc := http.NewResponseController(w)
	buf := make([]byte, 1<<20)
	for left := size; left > 0; {
		_ = rc.SetWriteDeadline(time.Now().Add(stallTimeout))
		n, err := f.Read(buf[:min(int64(len(buf)), left)])
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return werr
			}
			left -= int64(n)
		}
		if err != nil && left > 0 {
			return err
		}
	}
	_ = rc.SetWriteDeadline(time.Time{})
	_ = rc.Flush() // a writer that cannot flush has it all already
	return nil
}

// noteCheckpoint tells the job's home of a checkpoint tried: kept on
// storedOn ("" for one handed to its user), or failed with err.
func (a *Agent) noteCheckpoint(home, id string, inc int, s savedCkpt, storedOn string, err error) {
	cp := api.Checkpoint{At: s.meta.At, Node: a.cfg.NodeID, FreezeMS: s.meta.FreezeMS, Bytes: s.size, StoredOn: storedOn,
		Out: s.meta.Out, Err: s.meta.Err, OK: err == nil}
	if cp.At.IsZero() {
		cp.At = time.Now()
	}
	if err != nil {
		cp.Error = err.Error()
	}
	a.metrics.ObserveCheckpoint(cp)
	if err := retry(func() error { return a.noteHome(home, jobNote{ID: id, Inc: &inc, Checkpoint: &cp}) }); err != nil {
		a.log.Warn("checkpoint: home not told", "job", id, "home", home, "err", err)
	}
}

// ---- periodic checkpoints ----

// ckptTick is how often the checkpoint loop looks for jobs due.
const ckptTick = 500 * time.Millisecond

// checkpointLoop saves, one at a time, every job running here whose
// periodic checkpoint is due, and sends it to the node that keeps it.
func (a *Agent) checkpointLoop() {
	defer a.wg.Done()
	t := time.NewTicker(ckptTick)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-t.C:
		}
		for _, id := range a.jobs.checkpointsDue(time.Now()) {
			select {
			case <-a.stop:
				return
			default:
			}
			a.periodicCheckpoint(id)
		}
	}
}

// checkpointDue says whether a job checkpointed every `every` is due at
// now, and how late: counted from its last checkpoint here, or from when
// it started or came here (a checkpoint is not taken at once on arrival:
// the one it left is as new).
func checkpointDue(every time.Duration, last, arrived, now time.Time) (time.Duration, bool) {
	if every <= 0 {
		return 0, false
	}
	from := last
	if from.Before(arrived) {
		from = arrived
	}
	late := now.Sub(from) - every
	return late, late >= 0
}

// periodicCheckpoint saves job id and sends the file to the node that
// keeps it; a failure is noted in the job's record and tried again at the
// next interval.
func (a *Agent) periodicCheckpoint(id string) {
	start := time.Now()
	home, inc, ok := a.jobs.startPeriodic(id, start)
	if !ok {
		return
	}
	s, err := a.checkpointLocal(id, false)
	if err != nil {
		if !errors.Is(err, peer.ErrNotFound) {
			a.log.Warn("periodic checkpoint failed", "job", id, "err", err)
			a.noteCheckpoint(home, id, inc, s, "", err)
		}
		return
	}
	defer os.Remove(s.path)
	store := checkpointStore(id, a.cfg.NodeID, home, a.members.Live())
	if store == "" {
		err = errkind.New(peer.ErrUnavailable, "no other live node to keep it")
	} else {
		err = a.sendToStore(store, s)
	}
	if err != nil {
		a.log.Warn("periodic checkpoint not kept", "job", id, "store", store, "err", err)
		a.noteCheckpoint(home, id, inc, s, "", err)
		return
	}
	a.log.Info("periodic checkpoint", "job", id, "stored_on", store, "bytes", s.size, "freeze_ms", s.meta.FreezeMS,
		"total_ms", msSince(start))
	a.noteCheckpoint(home, id, inc, s, store, nil)
}

// checkpointStore picks the node that keeps a job's periodic checkpoint:
// its home when the job runs elsewhere, else one of the other live nodes,
// the same for a job each time while it can (by a hash of the job id), so
// the jobs of a home spread over the others. "" when there is none.
func checkpointStore(id, running, home string, live []string) string {
	if home != running && slices.Contains(live, home) {
		return home
	}
	var others []string
	for _, n := range live {
		if n != running {
			others = append(others, n)
		}
	}
	if len(others) == 0 {
		return ""
	}
	sort.Strings(others)
	h := fnv.New32a()
	h.Write([]byte(id))
	return others[h.Sum32()%uint32(len(others))]
}

// sendToStore hands a checkpoint file to the node that keeps it.
func (a *Agent) sendToStore(node string, s savedCkpt) error {
	if node == a.cfg.NodeID {
		return a.keeper.Keep(s.hdr.ID, s.path, s.hdr.Inc, s.meta.At)
	}
	return a.sendFile(node, peer.CkptKeep+"?id="+url.QueryEscape(s.hdr.ID), s.path, s.size, nil)
}

// sendFile posts a file to a peer and decodes its answer into out.
func (a *Agent) sendFile(node, path, file string, size int64, out any) error {
	addr, err := a.members.PeerAddr(node)
	if err != nil {
		return err
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	_, _, err = a.postStream(addr, path, size, func(w io.Writer) error {
		_, err := io.CopyN(w, f, size)
		return err
	}, out)
	return peer.Err(err)
}

// servePeerKeep is /v1/peer/ckpt/keep: a job's periodic checkpoint, for
// this node to keep.
func (a *Agent) servePeerKeep(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if _, ok := migrate.JobHome(id); !ok {
		writeError(w, errkind.New(peer.ErrBadRequest, "job id %q", id))
		return
	}
	body, stop := watchedBody(w, r)
	f, err := a.keeper.Take(body, r.ContentLength, newMID())
	stop()
	s := fromFile(f)
	if err == nil && s.hdr.ID != id {
		os.Remove(s.path)
		err = errkind.New(peer.ErrBadRequest, "checkpoint of job %s sent as job %s", s.hdr.ID, id)
	}
	if err == nil {
		err = a.keeper.Keep(id, s.path, s.hdr.Inc, s.meta.At)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

// dropCheckpointOn asks node to drop job id's checkpoint older than
// before (zero: any), in the background.
func (a *Agent) dropCheckpointOn(node, id string, before time.Time) {
	q := peer.CkptDrop + "?id=" + url.QueryEscape(id)
	if !before.IsZero() {
		q += "&before=" + url.QueryEscape(before.Format(time.RFC3339Nano))
	}
	go func() {
		if err := a.peers.Call(node, http.MethodPost, q, nil, nil); err != nil {
			a.log.Debug("checkpoint drop", "job", id, "node", node, "err", err)
		}
	}()
}
