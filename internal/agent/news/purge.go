package news

// Removing ended jobs: on their own after limits.keep_finished (or past
// limits.keep_finished_per_user), and on request with `roam purge`. A
// removed job's record and its output at its home are gone; `roam ps`
// no longer lists it.

import (
	"time"

	"roam/internal/agent/httpx"
	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/errkind"
)

// expireJobs removes this home's ended jobs that Limits.Expired picks.
func (r *Relay) expireJobs(now time.Time) int {
	recs := r.c.Jobs.Ended(0, true)
	return r.removeEnded(r.c.Limits.Expired(recs, now))
}

// removeEnded removes these of this home's jobs that have ended (a job
// that runs is never removed) and returns how many it removed.
func (r *Relay) removeEnded(ids []string) int {
	if len(ids) == 0 {
		return 0
	}
	gone, err := r.c.Jobs.RemoveEnded(ids)
	if err != nil {
		r.c.Log.Error("job table: remove ended jobs", "err", err)
		return 0
	}
	for _, rec := range gone {
		r.c.Spools.Remove(rec.ID)
		if rec.Newest != nil && rec.Newest.StoredOn != "" {
			// A lost job's newest checkpoint is kept until the job goes.
			r.c.DropCheckpoint(rec.Newest.StoredOn, rec.ID, time.Time{})
		}
	}
	return len(gone)
}

// PurgeLocal is peer.Purge: this home's part of a purge.
func (r *Relay) PurgeLocal(req peer.PurgeRequest) (api.PurgeResult, error) {
	var ids []string
	for _, rec := range r.c.Jobs.Ended(req.UID, req.All) {
		ids = append(ids, rec.ID)
	}
	return api.PurgeResult{Removed: r.removeEnded(ids)}, nil
}

// Purge is `roam purge`: it removes the caller's ended jobs at every live
// home. Root may name another user, or every user.
func (r *Relay) Purge(c httpx.Caller, req api.PurgeRequest) (api.PurgeResult, error) {
	pr := peer.PurgeRequest{UID: c.UID}
	switch {
	case req.All && c.UID != 0:
		return api.PurgeResult{}, errkind.New(peer.ErrPermission, "purge --all: only root may remove every user's jobs")
	case req.All:
		pr.All = true
	case req.UID != nil && *req.UID != c.UID && c.UID != 0:
		return api.PurgeResult{}, errkind.New(peer.ErrPermission, "purge --user %d: only root may remove another user's jobs", *req.UID)
	case req.UID != nil:
		pr.UID = *req.UID
	}
	var res api.PurgeResult
	for _, part := range r.c.PurgeHomes(pr) {
		res.Removed += part.Removed
	}
	return res, nil
}
