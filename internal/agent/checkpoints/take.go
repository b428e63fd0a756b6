package checkpoints

// `roam checkpoint`: the caller's running job saved into a sealed file
// (format in package migrate) that its owner gets, from the node it runs
// on.

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"roam/internal/agent/httpx"
	"roam/internal/agent/keeper"
	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/migrate"
)

// Checkpoint is `roam checkpoint`: it saves the caller's running job and
// writes the sealed file to w (the CLI writes it, as the user, where the
// user said).
func (c *Checkpoints) Checkpoint(caller httpx.Caller, req api.CheckpointRequest, w http.ResponseWriter) error {
	rec, err := c.cfg.Record(req.ID)
	if err != nil {
		return err
	}
	if !caller.MayAct(rec.UID) {
		return errkind.New(peer.ErrPermission, "%s: permission denied", req.ID)
	}
	if rec.State != api.StateRunning {
		return errkind.New(peer.ErrBadRequest, "%s: job is %s, not running", rec.ID, rec.State)
	}
	if rec.Node == c.cfg.Self {
		return c.checkpointTo(w, req.ID, req.Stop)
	}
	addr, err := c.cfg.Members.PeerAddr(rec.Node)
	if err != nil {
		return err
	}
	body, err := api.JSONBody(peer.CheckpointRequest{ID: req.ID, Stop: req.Stop})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.CallTimeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+peer.CkptTake, body)
	if err != nil {
		return err
	}
	resp, err := c.cfg.Peers.HTTP.Do(hreq)
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

// ServeTake is peer.CkptTake.
func (c *Checkpoints) ServeTake(w http.ResponseWriter, r *http.Request) {
	var req peer.CheckpointRequest
	if err := httpx.Decode(r, &req); err != nil {
		httpx.WriteError(w, err)
		return
	}
	if _, ok := migrate.JobHome(req.ID); !ok {
		httpx.WriteError(w, errkind.New(peer.ErrBadRequest, "job id %q", req.ID))
		return
	}
	if err := c.checkpointTo(w, req.ID, req.Stop); err != nil {
		httpx.WriteError(w, err)
	}
}

// checkpointTo saves job id, running here, and answers with its file;
// once the answer has begun, an error is the machine's (the job thawed,
// the file gone) and nothing more can be said to the caller.
func (c *Checkpoints) checkpointTo(w http.ResponseWriter, id string, stop bool) error {
	began := false
	_, err := c.cfg.Save(id, stop, "roam checkpoint", func(f keeper.File) (string, error) {
		began = true
		return "", httpx.ServeFile(w, f.Path, f.Size, c.cfg.Stall)
	})
	if began {
		return nil
	}
	return err
}
