package checkpoints

// Periodic checkpoints (`roam run --checkpoint-every`): the node running
// a job saves it at each interval and sends the file to the node that
// keeps the newest (the job's home, or, for a job running at its home,
// another live node).

import (
	"errors"
	"net/http"
	"net/url"
	"sync"
	"time"

	"roam/internal/agent/httpx"
	"roam/internal/agent/keeper"
	"roam/internal/agent/peer"
	"roam/internal/errkind"
	"roam/internal/migrate"
)

// tick is how often the checkpoint loop looks for jobs due.
const tick = 500 * time.Millisecond

// Loop saves, one at a time, every job running here whose periodic
// checkpoint is due, and sends it to the node that keeps it, until stop
// is closed; it first resumes the restarts after fenced kills this home
// was trying when its agent stopped (ResumeFenced). wg holds the loop
// (Loop calls its Done).
func (c *Checkpoints) Loop(stop <-chan struct{}, wg *sync.WaitGroup) {
	defer wg.Done()
	c.ResumeFenced()
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		for _, id := range c.cfg.Jobs.CheckpointsDue(time.Now()) {
			select {
			case <-stop:
				return
			default:
			}
			c.periodic(id)
		}
	}
}

// periodic saves job id and sends the file to the node that keeps it; a
// failure is noted in the job's record and tried again at the next
// interval.
func (c *Checkpoints) periodic(id string) {
	start := time.Now()
	home, ok := c.cfg.Jobs.StartPeriodic(id, start)
	if !ok {
		return
	}
	f, err := c.cfg.Save(id, false, "periodic checkpoint", func(f keeper.File) (string, error) {
		storeFor := c.cfg.StoreFor
		if storeFor == nil {
			storeFor = keeper.StoreFor
		}
		store := storeFor(id, c.cfg.Self, home, c.cfg.Members.Live())
		if store == "" {
			return "", errkind.New(peer.ErrUnavailable, "its home %s is not live to keep it", home)
		}
		return store, c.sendToStore(store, f)
	})
	if err != nil {
		if !errors.Is(err, peer.ErrNotFound) {
			c.log.Warn("periodic checkpoint failed", "job", id, "err", err)
		}
		return
	}
	c.log.Info("periodic checkpoint", "job", id, "bytes", f.Size, "freeze_ms", f.Meta.FreezeMS,
		"total_ms", float64(time.Since(start).Microseconds())/1000)
}

// sendToStore hands a checkpoint file to the node that keeps it.
func (c *Checkpoints) sendToStore(node string, f keeper.File) error {
	if node == c.cfg.Self {
		return c.cfg.Keeper.Keep(f.Hdr.ID, f)
	}
	return c.sendFile(node, peer.CkptKeep+"?id="+url.QueryEscape(f.Hdr.ID), f.Path, f.Size, nil)
}

// ServeKeep is peer.CkptKeep: a job's periodic checkpoint, for this node
// to keep.
func (c *Checkpoints) ServeKeep(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if _, ok := migrate.JobHome(id); !ok {
		httpx.WriteError(w, errkind.New(peer.ErrBadRequest, "job id %q", id))
		return
	}
	body, stop := httpx.WatchedBody(w, r, c.cfg.Stall)
	f, release, err := c.cfg.Keeper.Take(body, r.ContentLength, peer.NewMID(), func(b migrate.Binding) error {
		if b.Job != id {
			return errkind.New(peer.ErrBadRequest, "checkpoint of job %s sent as job %s", b.Job, id)
		}
		return c.cfg.Keeper.FitsKept(b, r.ContentLength)
	})
	stop()
	if err == nil {
		err = c.cfg.Keeper.Keep(id, f)
		release()
	}
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, struct{}{})
}

// ServeDrop is peer.CkptDrop: drop the checkpoint of job id kept here,
// if older than before (none: any).
func (c *Checkpoints) ServeDrop(w http.ResponseWriter, r *http.Request) {
	var before time.Time
	if b := r.URL.Query().Get("before"); b != "" {
		var err error
		if before, err = time.Parse(time.RFC3339Nano, b); err != nil {
			httpx.WriteError(w, errkind.New(peer.ErrBadRequest, "before: %v", err))
			return
		}
	}
	if err := c.cfg.Keeper.Drop(r.URL.Query().Get("id"), before); err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, struct{}{})
}

// DropOn asks node to drop job id's checkpoint older than before (zero:
// any), in the background.
func (c *Checkpoints) DropOn(node, id string, before time.Time) {
	q := peer.CkptDrop + "?id=" + url.QueryEscape(id)
	if !before.IsZero() {
		q += "&before=" + url.QueryEscape(before.Format(time.RFC3339Nano))
	}
	go func() {
		if err := c.cfg.Peers.Call(node, http.MethodPost, q, nil, nil); err != nil {
			c.log.Debug("checkpoint drop", "job", id, "node", node, "err", err)
		}
	}()
}
