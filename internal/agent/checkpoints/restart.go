package checkpoints

// Restarts from a checkpoint: `roam restart FILE`, and a home restarting a
// job whose node membership declared dead from the job's newest periodic
// checkpoint. Either is a run of the destination machine (package migrate,
// dest_file.go) on the node that restores, whose source is the sealed
// file: the uploader, or the node that keeps the file, picks that node
// and sends the file there (or runs it itself); the run asks the home's
// consent (consent.go), restores the copy stopped, and resumes it on the
// home's commit (Config.Restore runs it; package reopen holds the run's
// file and its calls to the home).

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"roam/internal/agent/httpx"
	"roam/internal/agent/keeper"
	"roam/internal/agent/launch"
	"roam/internal/agent/loss"
	"roam/internal/agent/peer"
	"roam/internal/agent/relay"
	"roam/internal/agent/reopen"
	"roam/internal/api"
	"roam/internal/cpufeat"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/migrate"
	"roam/internal/slurm"
)

// maxWhy bounds the reason and node name a restore's query carries.
const maxWhy = 200

// Restart is `roam restart`: the checkpoint file from the CLI, read from
// body, runs again as its job, on node q's "on" ("" the best one), in the
// Slurm job q's "slurm" names (the caller's SLURM_JOB_ID, checked as a
// run's; "": in none, whatever Slurm job the file's served).
func (c *Checkpoints) Restart(caller httpx.Caller, q url.Values, body io.Reader, length int64) (api.RestartResponse, error) {
	if length <= 0 {
		return api.RestartResponse{}, errkind.New(peer.ErrBadRequest, "restart: the checkpoint's length must be given (Content-Length)")
	}
	on, slurmJob := q.Get("on"), q.Get("slurm")
	var within map[string]int
	if slurmJob != "" {
		// Before the body is taken: a refusal keeps nothing.
		var err error
		if within, err = c.cfg.Allocation(caller, slurmJob); err != nil {
			return api.RestartResponse{}, err
		}
	}
	// The caller may restart it, judged from its head before its body is
	// taken; the file counts in its owner's budgets until the run ended.
	f, release, err := c.cfg.Keeper.Take(body, length, peer.NewMID(), func(b migrate.Binding) error {
		return reopen.MayRestart(caller.UID, caller.GID, caller.Groups, b)
	})
	if err != nil {
		return api.RestartResponse{}, err
	}
	defer release()
	// Its home keeps its record, which decides: a home gone from the
	// cluster took the record, and the job's checkpoints end with it (a
	// new job at every upload would be one more copy each).
	home, targets := f.Hdr.Home, []string(nil)
	if p, ok := c.cfg.Members.Get(home); !ok && home != c.cfg.Self {
		err = errkind.New(peer.ErrNotFound, "node %s, the home of job %s, is not in this cluster: the job's record, and its checkpoints, went with it", home, f.Hdr.ID)
	} else if ok && !p.Alive {
		err = errkind.New(peer.ErrUnavailable, "node %s, the home of job %s, is not alive", home, f.Hdr.ID)
	}
	if err == nil {
		targets, _, err = c.cfg.Members.Place(on, 1, c.cfg.Draining(), f.Hdr.Req, c.heldMB(), f.Hdr.CPU, within)
	}
	if err == nil && len(targets) == 0 {
		err = errkind.New(peer.ErrUnavailable, "no live node to restart job %s on", f.Hdr.ID)
	}
	if err != nil {
		os.Remove(f.Path)
		return api.RestartResponse{}, err
	}
	return c.restoreOn(targets[0], f, reopen.Target{Home: home, Why: "roam restart", Rebind: true, Slurm: slurmJob, Within: launch.WithinIDs(within)})
}

// restoreOn restarts the checked checkpoint file f on node target: it
// runs the restart here, or sends the file there. The file is the run's
// (or, sent, removed).
func (c *Checkpoints) restoreOn(target string, f keeper.File, req reopen.Target) (api.RestartResponse, error) {
	if target == c.cfg.Self {
		return c.restartHere(f, req)
	}
	defer os.Remove(f.Path)
	q := url.Values{"home": {req.Home}, "lost": {req.Lost}, "why": {req.Why}}
	if req.Rebind {
		q.Set("rebind", "1")
		q.Set("slurm", req.Slurm)
		q.Set("within", strings.Join(req.Within, ","))
	}
	var res api.RestartResponse
	err := c.sendFile(target, peer.Restore+"?"+q.Encode(), f.Path, f.Size, &res)
	return res, err
}

// restartHere runs a restart of the checked checkpoint file f here, and
// answers once it ended (the job runs here, or nothing of it does).
func (c *Checkpoints) restartHere(f keeper.File, req reopen.Target) (api.RestartResponse, error) {
	mid := peer.NewMID()
	// Under a name of its own, which a restarted agent keeps for the run.
	path, err := c.cfg.Keeper.NewPath(keeper.Restarting, mid)
	if err == nil {
		err = os.Rename(f.Path, path)
	}
	if err != nil {
		os.Remove(f.Path)
		return api.RestartResponse{}, err
	}
	f.Path = path
	run := reopen.NewRun(f, req)
	r, err := c.cfg.Restore(run, migrate.Restart{MID: mid, Job: f.Hdr.ID, Home: req.Home, File: path})
	return api.RestartResponse{ID: r.Job, Node: c.cfg.Self, Inc: r.Inc}, err
}

// ServeRestore is peer.Restore: a checkpoint file to restart here.
func (c *Checkpoints) ServeRestore(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := reopen.Target{Home: q.Get("home"), Lost: q.Get("lost"), Why: q.Get("why")}
	if _, known := c.cfg.Members.Get(req.Home); !known && req.Home != c.cfg.Self || len(req.Why) > maxWhy || len(req.Lost) > maxWhy || c.bindOf(q, &req) != nil {
		httpx.WriteError(w, errkind.New(peer.ErrBadRequest, "restore: bad query %q", relay.LimitText(r.URL.RawQuery)))
		return
	}
	body, stop := httpx.WatchedBody(w, r, c.cfg.Stall)
	// The node that sent it judged its caller; this one holds it in
	// its owner's budgets until the run ended.
	f, release, err := c.cfg.Keeper.Take(body, r.ContentLength, peer.NewMID(), func(migrate.Binding) error { return nil })
	stop()
	var res api.RestartResponse
	if err == nil {
		res, err = c.restartHere(f, req)
		release()
	}
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, res)
}

// bindOf reads a restore's Slurm binding from its query into req: the
// Slurm job and its nodes, each a member, when rebind is set.
func (c *Checkpoints) bindOf(q url.Values, req *reopen.Target) error {
	if q.Get("rebind") == "" {
		return nil
	}
	req.Rebind, req.Slurm = true, q.Get("slurm")
	if w := q.Get("within"); w != "" {
		req.Within = strings.Split(w, ",")
	}
	if (req.Slurm == "") != (len(req.Within) == 0) || len(req.Within) > slurm.MaxNodes {
		return errors.New("a Slurm job without nodes, or nodes without one")
	}
	if req.Slurm != "" && slurm.ValidJobID(req.Slurm) != nil {
		return errors.New("not a Slurm job id")
	}
	for _, n := range req.Within {
		if _, known := c.cfg.Members.Get(n); !known && n != c.cfg.Self {
			return errors.New("not a member")
		}
	}
	return nil
}

// RestoreKept is peer.CkptRestore: the home asks this node, which keeps
// job req.ID's newest checkpoint, to restart it on node req.On.
func (c *Checkpoints) RestoreKept(req reopen.Target) (api.RestartResponse, error) {
	if h, ok := migrate.JobHome(req.ID); !ok || h != req.Home || req.On == "" || len(req.Why) > maxWhy || len(req.Lost) > maxWhy {
		return api.RestartResponse{}, errkind.New(peer.ErrBadRequest, "restore of job %q: bad request", relay.LimitText(req.ID))
	}
	// A link of its own: a newer file kept meanwhile replaces the name,
	// not what is checked and restored.
	f, err := c.cfg.Keeper.Open(req.ID, peer.NewMID(), c.cfg.Self)
	if err != nil {
		return api.RestartResponse{}, err
	}
	return c.restoreOn(req.On, f, req)
}

// RestartLost restarts job rec, which ran on the lost node lost, from its
// newest checkpoint, kept on rec.Newest.StoredOn: it picks a node other
// than lost (the consent refuses that one), and the store sends the file
// there, whose run asks this home's consent. The job is held for it
// meanwhile (no second restart). A try that fails for a reason of the
// moment (no live node, as a home cut off itself sees it; the store
// unreachable; a restore that failed) is tried again as nodes come back,
// with backoff (loss.RetryAfter), while the record still says the job
// runs, or was lost, on lost as this incarnation; the job is marked lost
// only when its checkpoint is gone or the tries end. fenced: lost killed
// the job by its fence and said so (it may be alive). It blocks until
// the restart ran or the tries ended.
func (c *Checkpoints) RestartLost(rec job.Record, lost string, fenced bool) {
	if !fenced && (c.cfg.Members.Alive(lost) || c.cfg.Peers.Answers(lost)) {
		return // it answers again: its copy runs on (the next sweep sees)
	}
	c.tries.begin(rec.ID) // before the hold: a fenced kill told meanwhile is seen
	defer c.tries.end(rec.ID)
	c.keepFenced(rec, lost, fenced)
	if !c.cfg.Jobs.AwaitRestart(rec.ID, lost) {
		if fenced {
			c.tries.fenced(rec.ID) // the restart that holds it knows now
		}
		return
	}
	began := time.Now()
	for tries := 1; ; tries++ {
		err := c.restartOnce(rec, lost, fenced)
		c.cfg.Jobs.EndAwait(rec.ID)
		if err == nil {
			c.keepFenced(rec, lost, false)
			return
		}
		wait, again := loss.RetryAfter(tries, began, time.Now())
		if gone := c.checkpointGone(rec, err); gone != "" || !again {
			c.log.Warn("restart after node loss: not restarted", "job", rec.ID, "tries", tries, "gone", gone, "err", err)
			c.markLost(rec.ID, lost)
			c.keepFenced(rec, lost, false)
			return
		}
		// Held while it waits: no sweep starts another restart of it.
		if !c.cfg.Jobs.AwaitRestart(rec.ID, lost) {
			return // another restart holds it
		}
		c.log.Warn("restart after node loss failed: tried again", "job", rec.ID, "tries", tries, "in", wait, "err", err)
		if !c.wait(wait) {
			c.cfg.Jobs.EndAwait(rec.ID)
			return
		}
		if !fenced && c.tries.takeFenced(rec.ID) {
			fenced = true
			c.keepFenced(rec, lost, true)
		}
		var ok bool
		if rec, ok = c.stillLost(rec, lost, fenced); !ok {
			c.cfg.Jobs.EndAwait(rec.ID)
			c.keepFenced(rec, lost, false)
			return
		}
	}
}

// keepFenced notes in the keeper's directory that job rec's node lost
// killed it by its fence (fenced) and its restart is being tried, or
// forgets it (not fenced): a restarted agent tries it again
// (ResumeFenced). An end by the agent's stop forgets nothing.
func (c *Checkpoints) keepFenced(rec job.Record, lost string, fenced bool) {
	if err := c.tries.keep(filepath.Join(c.cfg.Keeper.Dir(), fencedFile), rec, lost, fenced); err != nil {
		c.log.Error("restart after a fenced kill: keeping it for a restart of this agent", "job", rec.ID, "err", err)
	}
}

// ResumeFenced tries again, at the agent's start, the restarts of jobs
// their nodes' fences killed that it was trying when it stopped
// (fencedFile), while their records still say they run on those nodes
// as the same incarnation.
func (c *Checkpoints) ResumeFenced() {
	for id, e := range readFenced(filepath.Join(c.cfg.Keeper.Dir(), fencedFile)) {
		rec, err := c.cfg.Jobs.HomeRecord(id)
		if err != nil || rec.Inc != e.Inc || rec.Node != e.Lost || rec.Newest == nil || rec.State != job.StateRunning && rec.State != job.StateLost {
			c.keepFenced(job.Record{ID: id}, e.Lost, false)
			continue
		}
		c.log.Info("restart after a fenced kill: tried again after this agent's start", "job", id, "lost", e.Lost)
		go c.RestartLost(rec, e.Lost, true)
	}
}

// restartOnce is one try of RestartLost: it picks the node and asks the
// store to restart the job there, and returns once the store answered.
func (c *Checkpoints) restartOnce(rec job.Record, lost string, fenced bool) error {
	why := fmt.Sprintf("node %s was declared dead", lost)
	if fenced {
		why = fmt.Sprintf("node %s killed it, unable to reach its home for fence.kill", lost)
	}
	store := rec.Newest.StoredOn
	// The checkpoint's CPU came in a note from a peer: text that does not
	// parse is unknown, and the consent's check (target) judges again.
	image, _ := cpufeat.Parse(rec.Newest.CPU)
	others := map[string]int{}
	for id := range c.cfg.Members.All() {
		if id != lost {
			others[id] = 0 // no cap on its CPUs (sched.Within)
		}
	}
	targets, _, err := c.cfg.Members.Place("", 1, c.cfg.Draining(), rec.Req, c.heldMB(), image, others)
	if err == nil && len(targets) == 0 {
		err = errkind.New(peer.ErrUnavailable, "no live node to restart job %s on", rec.ID)
	}
	if err != nil {
		return err
	}
	req := reopen.Target{ID: rec.ID, Home: c.cfg.Self, On: targets[0], Lost: lost, Why: why}
	c.log.Info("restarting a job of a lost node", "job", rec.ID, "lost", lost, "fenced", fenced, "on", req.On, "checkpoint_at", rec.Newest.At, "kept_on", store)
	// The store may be this node: the call then runs in process.
	return c.cfg.Peers.CallWithin(c.cfg.CallTimeout, store, http.MethodPost, peer.CkptRestore, req, nil)
}

// checkpointGone says why job rec's kept checkpoint is gone after a try
// that failed with err ("": it may be there still): its store keeps none
// (or the home no record), or the store left the cluster (unknown to
// membership past loss.Grace after this agent's start).
func (c *Checkpoints) checkpointGone(rec job.Record, err error) string {
	switch store := rec.Newest.StoredOn; {
	case errors.Is(err, peer.ErrNotFound):
		return "not found"
	case store != c.cfg.Self && !c.cfg.Members.Known(store) && time.Since(c.cfg.Started()) > loss.Grace:
		// (Membership lists every live node only some rounds after this
		// agent's start: a restart it resumes then waits for it.)
		return "its keeper " + store + " left the cluster"
	}
	return ""
}

// stillLost is job rec's record now, if a restart of it from the lost
// node lost should be tried again: the same incarnation, lost with that
// node or recorded running there while the node is dead or its fence
// killed it.
func (c *Checkpoints) stillLost(rec job.Record, lost string, fenced bool) (job.Record, bool) {
	cur, err := c.cfg.Jobs.HomeRecord(rec.ID)
	if err != nil || cur.Inc != rec.Inc || cur.Node != lost || cur.Newest == nil {
		return rec, false
	}
	// A node that answers again and told of no fenced kill may run it
	// still: its push says (back, or fenced).
	ok := cur.State == job.StateLost || cur.State == job.StateRunning
	return cur, ok && (fenced || !c.cfg.Members.Alive(lost) && !c.cfg.Peers.Answers(lost))
}

// wait waits d, false when the agent stops first.
func (c *Checkpoints) wait(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.cfg.Stop:
		return false
	case <-t.C:
		return true
	}
}

// markLost marks job id lost with node, if its record still says it runs
// there.
func (c *Checkpoints) markLost(id, node string) {
	uid, marked, err := c.cfg.Jobs.MarkLostOn(id, node, time.Now())
	if err != nil {
		c.log.Error("job table", "err", err)
	}
	if marked {
		c.cfg.Event(api.Event{Kind: "lost", Job: id, UID: &uid, From: node, Why: "its node was declared dead"})
	}
}
