package agent

// Removing ended jobs: on their own after limits.keep_finished (or past
// limits.keep_finished_per_user), and on request with `roam purge`. A
// removed job's record and its output at its home are gone; `roam ps`
// no longer lists it.

import (
	"net/http"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/errkind"
)

// expireEvery is how often a home removes the jobs past their keep.
const expireEvery = time.Minute

// expireJobs removes this home's ended jobs that Limits.expired picks.
func (a *Agent) expireJobs(now time.Time) int {
	recs := a.jobs.Ended(0, true)
	return a.removeEnded(a.cfg.Limits.Expired(recs, now))
}

// removeEnded removes these of this home's jobs that have ended (a job
// that runs is never removed) and returns how many it removed.
func (a *Agent) removeEnded(ids []string) int {
	if len(ids) == 0 {
		return 0
	}
	gone, err := a.jobs.RemoveEnded(ids)
	if err != nil {
		a.log.Error("job table: remove ended jobs", "err", err)
		return 0
	}
	for _, r := range gone {
		a.spools.Remove(r.ID)
		if r.Newest != nil && r.Newest.StoredOn != "" {
			// A lost job's newest checkpoint is kept until the job goes.
			a.checkpoints.DropOn(r.Newest.StoredOn, r.ID, time.Time{})
		}
	}
	return len(gone)
}

// purgeRequest asks a node to remove its ended jobs of one user, or of
// every user (All, root only at the edge).
type purgeRequest struct {
	UID uint32 `json:"uid"`
	All bool   `json:"all,omitempty"`
}

// purgeLocal is /v1/peer/purge: this home's part of a purge.
func (a *Agent) purgeLocal(req purgeRequest) (api.PurgeResult, error) {
	var ids []string
	for _, r := range a.jobs.Ended(req.UID, req.All) {
		ids = append(ids, r.ID)
	}
	return api.PurgeResult{Removed: a.removeEnded(ids)}, nil
}

// Purge is `roam purge`: it removes the caller's ended jobs at every live
// home. Root may name another user, or every user.
func (a *Agent) Purge(c Caller, req api.PurgeRequest) (api.PurgeResult, error) {
	pr := purgeRequest{UID: c.UID}
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
	for _, part := range fanOut[api.PurgeResult](a, http.MethodPost, peer.Purge, pr) {
		res.Removed += part.Removed
	}
	return res, nil
}
