package agent

// Restarts from a checkpoint: `roam restart FILE`, and a home restarting a
// job whose node membership declared dead from the job's newest periodic
// checkpoint. Either is a run of the destination machine (package migrate,
// dest_file.go) on the node that restores, whose source is the sealed
// file: the uploader, or the node that keeps the file, picks that node
// and sends the file there (or runs it itself); the run asks the home's
// consent, restores the copy stopped, and resumes it on the home's commit
// (migrate_dest.go carries out its actions; package reopen holds the run's
// file and its calls to the home).
//
// Never two copies: a run needs the home's consent ("reopen"), which it
// gives only to a job that does not run (ended, lost, or running on a
// node declared dead) and no other run holds, once per run, and which
// raises the job's incarnation (Inc) in its record before any copy is
// restored. From then on the home takes news only of the new
// incarnation: a copy of an older one (the old node
// was cut off, not dead, and comes back) gets "gone" at its first push,
// so its node kills it, and its output and exit status are dropped
// (relay.go). The home cuts its copy of the output back to the
// checkpoint's offsets: the restored job writes on from there.

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"roam/internal/agent/keeper"
	"roam/internal/agent/peer"
	"roam/internal/agent/relay"
	"roam/internal/agent/reopen"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/migrate"
)

// Restart is `roam restart`: the checkpoint file from the CLI, read from
// body, runs again as its job, on node on ("" the best one).
func (a *Agent) Restart(c Caller, on string, body io.Reader, length int64) (api.RestartResponse, error) {
	if length <= 0 {
		return api.RestartResponse{}, errkind.New(peer.ErrBadRequest, "restart: the checkpoint's length must be given (Content-Length)")
	}
	// One upload at a time per user: each holds a file on root's disk
	// until it is checked.
	if !a.jobs.BeginUpload(c.UID) {
		return api.RestartResponse{}, errkind.New(peer.ErrBadRequest, "restart: uid %d has another restart in progress", c.UID)
	}
	defer a.jobs.EndUpload(c.UID)
	f, err := a.keeper.Take(body, length, newMID())
	if err != nil {
		return api.RestartResponse{}, err
	}
	home, targets, err := f.Hdr.Home, []string(nil), reopen.MayRestart(c.UID, c.GID, c.Groups, f.Hdr)
	if p, ok := a.members.Get(home); err == nil && !ok {
		home = a.cfg.NodeID // another cluster's (same secret): this node is its home now
	} else if err == nil && !p.Alive {
		err = errkind.New(peer.ErrUnavailable, "node %s, the home of job %s, is not alive", home, f.Hdr.ID)
	}
	if err == nil {
		targets, _, err = a.members.Place(on, 1, a.drain.On())
	}
	if err == nil && len(targets) == 0 {
		err = errkind.New(peer.ErrUnavailable, "no live node to restart job %s on", f.Hdr.ID)
	}
	if err != nil {
		os.Remove(f.Path)
		return api.RestartResponse{}, err
	}
	return a.restoreOn(targets[0], f, reopen.Target{Home: home, Why: "roam restart"})
}

// restoreOn restarts the checked checkpoint file f on node target: it
// runs the restart here, or sends the file there. The file is the run's
// (or, sent, removed).
func (a *Agent) restoreOn(target string, f keeper.File, req reopen.Target) (api.RestartResponse, error) {
	if target == a.cfg.NodeID {
		return a.restartHere(f, req)
	}
	defer os.Remove(f.Path)
	q := url.Values{"home": {req.Home}, "lost": {req.Lost}, "why": {req.Why}}
	var res api.RestartResponse
	err := a.sendFile(target, peer.Restore+"?"+q.Encode(), f.Path, f.Size, &res)
	return res, err
}

// restartHere runs a restart of the checked checkpoint file f here, and
// answers once it ended (the job runs here, or nothing of it does).
func (a *Agent) restartHere(f keeper.File, req reopen.Target) (api.RestartResponse, error) {
	mid := newMID()
	// Under a name of its own, which a restarted agent keeps for the run.
	path, err := a.keeper.NewPath(keeper.Restarting, mid)
	if err == nil {
		err = os.Rename(f.Path, path)
	}
	if err != nil {
		os.Remove(f.Path)
		return api.RestartResponse{}, err
	}
	f.Path = path
	in := newInMig(mid, f.Hdr.ID)
	in.rst = &reopen.Run{File: f, Lost: req.Lost, Why: req.Why}
	in.hdr, in.images = in.rst.Header(), filepath.Join(a.imageDir, "restart-"+mid)
	a.migr.Adopt(mid, in)
	_, err = a.stepMig(in, migrate.Restart{MID: mid, Job: f.Hdr.ID, Home: req.Home, File: path})
	in.mu.Lock()
	defer in.mu.Unlock()
	r := in.m.Record()
	return api.RestartResponse{ID: r.Job, Node: a.cfg.NodeID, Inc: r.Inc}, err
}

// serveRestore is /v1/peer/restore: a checkpoint file to restart here.
func (a *Agent) serveRestore(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := reopen.Target{Home: q.Get("home"), Lost: q.Get("lost"), Why: q.Get("why")}
	if _, known := a.members.Get(req.Home); !known && req.Home != a.cfg.NodeID || len(req.Why) > maxWhy || len(req.Lost) > maxWhy {
		writeError(w, errkind.New(peer.ErrBadRequest, "restore: bad query %q", relay.LimitText(r.URL.RawQuery)))
		return
	}
	body, stop := watchedBody(w, r)
	f, err := a.keeper.Take(body, r.ContentLength, newMID())
	stop()
	var res api.RestartResponse
	if err == nil {
		res, err = a.restartHere(f, req)
	}
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// maxWhy bounds the reason and node name a restore's query carries.
const maxWhy = 200

// reopen is the home's consent to run req.MID: it checks that the job
// does not run and no other run holds it, and makes its record say it
// runs on req.On, as a new incarnation, its output cut back to the
// checkpoint's. The same run asking again gets the same consent.
func (a *Agent) reopen(req reopen.Request) (reopen.Consent, error) {
	if !migrate.ValidMID(req.MID) {
		return reopen.Consent{}, errkind.New(peer.ErrBadRequest, "restart run id %q", req.MID)
	}
	if ans, again, err := a.jobs.ConsentFor(req.ID, req.MID); again || err != nil {
		return ans, err
	}
	if h, ok := migrate.JobHome(req.ID); !ok {
		return reopen.Consent{}, errkind.New(peer.ErrBadRequest, "job id %q", req.ID)
	} else if h != a.cfg.NodeID && a.members.Known(h) {
		return reopen.Consent{}, errkind.New(peer.ErrBadRequest, "job %s has its home on node %s, not here", req.ID, h)
	}
	if err := req.Meta.Validate(); err != nil {
		return reopen.Consent{}, errkind.New(peer.ErrBadRequest, "%v", err)
	}
	if len(req.Owner.Groups) > migrate.MaxGroups {
		return reopen.Consent{}, errkind.New(peer.ErrBadRequest, "%d supplementary groups", len(req.Owner.Groups))
	}
	if !migrate.ValidEvery(req.Every) {
		return reopen.Consent{}, errkind.New(peer.ErrBadRequest, "checkpoint interval %v", req.Every)
	}
	targets, _, err := a.members.Place(req.On, 1, a.drain.On())
	if err != nil {
		return reopen.Consent{}, err
	}
	if len(targets) == 0 || targets[0] == req.Lost {
		return reopen.Consent{}, errkind.New(peer.ErrUnavailable, "no live node to restart job %s on", req.ID)
	}
	target := targets[0]
	id, had, err := a.jobs.RestartID(req, a.cfg.NodeID)
	if err != nil {
		return reopen.Consent{}, err
	}
	fresh := id == "" // a new id, which no record may hold
	if fresh {
		seq, err := a.store.NextSeqs(1)
		if err != nil {
			return reopen.Consent{}, err
		}
		id = fmt.Sprintf("%s.%d", a.cfg.NodeID, seq)
	} else if !had {
		_, seq, _ := jobSeq(id)
		if err := a.store.BumpSeq(seq); err != nil {
			return reopen.Consent{}, err
		}
	}
	now := time.Now()
	next, ans, err := a.jobs.Reopen(req, reopen.Consent{ID: id, Node: target, Home: a.cfg.NodeID, HomeAddr: a.peers.SelfAddr}, fresh, had, now)
	if err != nil {
		return reopen.Consent{}, err
	}
	uid := next.UID
	go a.event(api.Event{At: now, Kind: "restart", Job: id, UID: &uid, From: req.Meta.Node, To: target,
		Why: fmt.Sprintf("%s, from the checkpoint of %s", req.Why, req.Meta.At.Format(time.RFC3339))})
	return ans, nil
}

// restartLost restarts job id, which ran on the dead node lost, from its
// newest checkpoint, kept on store: it picks the node, and the store
// sends the file there, whose run asks this home's consent. The job is
// held for it meanwhile (no second restart, no loss); lost after all
// when no run took the consent.
func (a *Agent) restartLost(rec job.Record, lost string) {
	if a.members.Alive(lost) || a.peers.Answers(lost) {
		return // it answers again: its copy runs on (the next sweep sees)
	}
	if !a.jobs.AwaitRestart(rec.ID, lost) {
		return
	}
	store := rec.Newest.StoredOn
	targets, _, err := a.members.Place("", 1, a.drain.On())
	if err == nil && (len(targets) == 0 || targets[0] == lost) {
		err = errkind.New(peer.ErrUnavailable, "no live node to restart job %s on", rec.ID)
	}
	if err == nil {
		req := reopen.Target{ID: rec.ID, Home: a.cfg.NodeID, On: targets[0], Lost: lost, Why: fmt.Sprintf("node %s was declared dead", lost)}
		a.log.Info("restarting a job of a dead node", "job", rec.ID, "dead", lost, "on", req.On, "checkpoint_at", rec.Newest.At, "kept_on", store)
		// The store may be this node: the call then runs in process.
		err = a.peers.CallWithin(migrateTimeout, store, http.MethodPost, peer.CkptRestore, req, nil)
	}
	a.jobs.EndAwait(rec.ID)
	if err != nil {
		a.log.Warn("restart after node loss: not restarted", "job", rec.ID, "err", err)
		a.markLost(rec.ID, lost)
	}
}

// markLost marks job id lost with node, if its record still says it runs
// there.
func (a *Agent) markLost(id, node string) {
	uid, marked, err := a.jobs.MarkLostOn(id, node, time.Now())
	if err != nil {
		a.log.Error("job table", "err", err)
	}
	if marked {
		a.event(api.Event{Kind: "lost", Job: id, UID: &uid, From: node, Why: "its node was declared dead"})
	}
}
