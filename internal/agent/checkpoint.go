package agent

// Checkpoints: `roam checkpoint` saves a running job into a sealed file
// (format in package migrate) that its owner gets; `roam run
// --checkpoint-every` has the node running a job save it periodically and
// keep the newest on another node (its home, or, for a job running at its
// home, another live node), so that losing the running node does not lose
// it. Restarts are in restart.go.

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"time"

	"roam/internal/agent/httpx"
	"roam/internal/agent/keeper"
	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/migrate"
)

// savedCkpt is a checkpoint file this node wrote or took, root's.
type savedCkpt struct {
	path string
	size int64
	meta migrate.CheckpointMeta
	hdr  migrate.Header
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
		return a.checkpointTo(w, req.ID, req.Stop)
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
	if err := a.checkpointTo(w, req.ID, req.Stop); err != nil {
		writeError(w, err)
	}
}

// checkpointTo saves job id, running here, and answers with its file;
// once the answer has begun, an error is the machine's (the job thawed,
// the file gone) and nothing more can be said to the caller.
func (a *Agent) checkpointTo(w http.ResponseWriter, id string, stop bool) error {
	began := false
	_, err := a.out.CheckpointRun(id, stop, "roam checkpoint", func(f keeper.File) (string, error) {
		began = true
		return "", httpx.ServeFile(w, f.Path, f.Size, stallTimeout)
	})
	if began {
		return nil
	}
	return err
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
		for _, id := range a.jobs.CheckpointsDue(time.Now()) {
			select {
			case <-a.stop:
				return
			default:
			}
			a.periodicCheckpoint(id)
		}
	}
}

// periodicCheckpoint saves job id and sends the file to the node that
// keeps it; a failure is noted in the job's record and tried again at the
// next interval.
func (a *Agent) periodicCheckpoint(id string) {
	start := time.Now()
	home, ok := a.jobs.StartPeriodic(id, start)
	if !ok {
		return
	}
	f, err := a.out.CheckpointRun(id, false, "periodic checkpoint", func(f keeper.File) (string, error) {
		store := keeper.StoreFor(id, a.cfg.NodeID, home, a.members.Live())
		if store == "" {
			return "", errkind.New(peer.ErrUnavailable, "no other live node to keep it")
		}
		return store, a.sendToStore(store, fromFile(f))
	})
	if err != nil {
		if !errors.Is(err, peer.ErrNotFound) {
			a.log.Warn("periodic checkpoint failed", "job", id, "err", err)
		}
		return
	}
	a.log.Info("periodic checkpoint", "job", id, "bytes", f.Size, "freeze_ms", f.Meta.FreezeMS, "total_ms", msSince(start))
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
	_, _, err = a.out.PostStream(addr, path, size, func(w io.Writer) error {
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
