package control

// Sweeps in job control (package sweep): `roam ps SWEEP` and a sweep's
// references in `roam kill`, for the sweep's owner and root alone; a
// sweep's records come from its home in one call, and its pending jobs
// are ended there, before any of its running ones, whose end would
// release more.

import (
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"roam/internal/agent/httpx"
	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/sweep"
)

// signalWidth bounds the signals one roam kill sends at once.
const signalWidth = 32

// sweepRecords returns the records (without environments) of the jobs a
// sweep reference names, by index, from the sweep's home; caller must be
// the sweep's owner or root.
func (j *Jobs) sweepRecords(c httpx.Caller, s string) ([]job.Record, error) {
	ref, err := sweep.ParseRef(s)
	if err != nil {
		return nil, errkind.New(peer.ErrBadRequest, "%v", err)
	}
	home, _ := sweep.Home(ref.Sweep)
	var recs []job.Record
	if err := j.cfg.Peers.Call(home, http.MethodGet, peer.Sweep+"?id="+url.QueryEscape(ref.Sweep), nil, &recs); err != nil {
		return nil, err
	}
	if len(recs) == 0 {
		return nil, errkind.New(peer.ErrNotFound, "no sweep %s", ref.Sweep)
	}
	if !c.MayAct(recs[0].UID) {
		return nil, errkind.New(peer.ErrPermission, "sweep %s: permission denied", ref.Sweep)
	}
	sort.Slice(recs, func(a, b int) bool { return recs[a].Sweep.Index < recs[b].Sweep.Index })
	if ref.Indices == nil {
		return recs, nil
	}
	byIndex := map[int]job.Record{}
	for _, r := range recs {
		byIndex[r.Sweep.Index] = r
	}
	out := make([]job.Record, 0, len(ref.Indices))
	var missing []int
	for _, i := range ref.Indices {
		if r, ok := byIndex[i]; ok {
			out = append(out, r)
		} else {
			missing = append(missing, i)
		}
	}
	if len(missing) > 0 {
		return nil, errkind.New(peer.ErrNotFound, "sweep %s has no index %s", ref.Sweep, sweep.Ranges(missing))
	}
	return out, nil
}

// ServeSweep is peer.Sweep: a sweep's records at its home.
func (j *Jobs) ServeSweep(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if h, ok := sweep.Home(id); !ok || h != j.cfg.Self {
		httpx.WriteError(w, errkind.New(peer.ErrNotFound, "sweep %s does not have its home here", id))
		return
	}
	httpx.WriteJSON(w, http.StatusOK, j.cfg.Jobs.SweepRecords(id, false))
}

// Sweep is `roam ps SWEEP` (api.PathSweep): the jobs a sweep reference
// names and how they stand, for the sweep's owner and root.
func (j *Jobs) Sweep(c httpx.Caller, ref string) (api.Sweep, error) {
	recs, err := j.sweepRecords(c, ref)
	if err != nil {
		return api.Sweep{}, err
	}
	first := recs[0]
	out := api.Sweep{ID: first.Sweep.ID, User: first.User, UID: first.UID, Count: first.Sweep.Count, MaxRunning: first.Sweep.MaxRunning,
		RerunOf: first.Sweep.RerunOf, Failed: []int{}, Lost: []int{}}
	ms := make([]sweep.Member, len(recs))
	for i, r := range recs {
		ms[i] = sweep.Member{Index: r.Sweep.Index, State: r.State, Exit: r.ExitCode}
		out.Jobs = append(out.Jobs, api.SweepJob{ID: r.ID, Index: r.Sweep.Index, State: r.State, Node: r.Node, ExitCode: r.ExitCode})
	}
	s := sweep.Summarize(ms)
	out.Summary, out.Ended, out.OK, out.Lost, out.Running, out.Pending = s.String(), s.Ended(), s.OK, append(out.Lost, s.Lost...), s.Running, s.Pending
	for _, idx := range s.Failed {
		out.Failed = append(out.Failed, idx...)
	}
	sort.Ints(out.Failed)
	return out, nil
}

// killTarget is a job a roam kill names: its record, and whether it was
// named by its sweep (an ended one is then passed over: the kill ends
// the rest).
type killTarget struct {
	rec      job.Record
	viaSweep bool
}

// targets reads the records of the jobs and sweeps ids names; those it
// cannot are answered in out. pos is each id's place in the order named,
// a sweep's jobs by index, for the answers to keep it.
func (j *Jobs) targets(c httpx.Caller, ids []string) (ts []killTarget, out []api.KillResult, pos map[string]int) {
	pos = map[string]int{}
	place := func(id string) {
		if _, ok := pos[id]; !ok {
			pos[id] = len(pos)
		}
	}
	for _, id := range ids {
		if sweep.IsRef(id) {
			recs, err := j.sweepRecords(c, id)
			if err != nil {
				place(id)
				out = append(out, api.KillResult{ID: id, Error: err.Error()})
			}
			for _, r := range recs {
				place(r.ID)
				ts = append(ts, killTarget{r, true})
			}
			continue
		}
		place(id)
		r, err := j.Record(id)
		if err != nil {
			out = append(out, api.KillResult{ID: id, Error: err.Error()})
			continue
		}
		ts = append(ts, killTarget{rec: r})
	}
	return ts, out, pos
}

// signalAll sends sig to running jobs, signalWidth at a time; byRoot:
// root sends it.
func (j *Jobs) signalAll(recs []job.Record, sig int, byRoot bool) []api.KillResult {
	out := make([]api.KillResult, len(recs))
	sem := make(chan struct{}, signalWidth)
	var wg sync.WaitGroup
	for i, r := range recs {
		out[i].ID = r.ID
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := j.SignalOn(r.Node, r.ID, sig, byRoot && r.UID != 0); err != nil {
				out[i].Error = fmt.Sprintf("%s: %v", r.ID, err)
			}
		})
	}
	wg.Wait()
	return out
}

// endPending ends pending jobs at their homes (peer.Cancel), by home.
func (j *Jobs) endPending(byHome map[string][]string, sig int) []api.KillResult {
	var out []api.KillResult
	for home, ids := range byHome {
		var res []api.KillResult
		if err := j.cfg.Peers.Call(home, http.MethodPost, peer.Cancel, peer.CancelRequest{IDs: ids, Signal: sig}, &res); err != nil {
			for _, id := range ids {
				out = append(out, api.KillResult{ID: id, Error: fmt.Sprintf("%s: %v", id, err)})
			}
			continue
		}
		out = append(out, res...)
	}
	return out
}

// Cancel is peer.Cancel, at the jobs' home: it ends those still pending,
// and signals those that started since their caller read them.
func (j *Jobs) Cancel(req peer.CancelRequest) ([]api.KillResult, error) {
	if !EndsUnstarted(req.Signal) || len(req.IDs) > peer.MaxCancel {
		return nil, errkind.New(peer.ErrBadRequest, "cancel: signal %d, %d jobs", req.Signal, len(req.IDs))
	}
	started, unknown, err := j.cfg.Jobs.EndPending(req.IDs, req.Signal, time.Now())
	if err != nil {
		return nil, err
	}
	out := make([]api.KillResult, 0, len(req.IDs))
	have := map[string]bool{}
	for _, id := range unknown {
		have[id] = true
		out = append(out, api.KillResult{ID: id, Error: "unknown job " + id})
	}
	var running []job.Record
	for _, r := range started {
		have[r.ID] = true
		switch r = j.started(r); r.State {
		case job.StatePending:
			// Its start was refused since: it is pending again.
			k := api.KillResult{ID: r.ID}
			if _, _, err := j.cfg.Jobs.EndPending([]string{r.ID}, req.Signal, time.Now()); err != nil {
				k.Error = fmt.Sprintf("%s: %v", r.ID, err)
			}
			out = append(out, k)
		case job.StateFinished, job.StateLost:
			out = append(out, api.KillResult{ID: r.ID})
		case job.StateRunning:
			running = append(running, r)
		default:
			out = append(out, api.KillResult{ID: r.ID, Error: fmt.Sprintf("%s: job is %s", r.ID, r.State)})
		}
	}
	for _, id := range req.IDs {
		if !have[id] {
			out = append(out, api.KillResult{ID: id})
		}
	}
	all := map[string]bool{}
	for _, r := range running {
		all[r.ID] = true
	}
	return append(out, j.ended(j.signalAll(running, req.Signal, false), all)...), nil
}

// startedWait bounds how long a kill waits for a job that its home's
// queue is starting (a start request on its way to its node) to run.
const startedWait = 10 * time.Second

// started is job r's record once it is no longer starting (its home's
// queue released it, and its node's answer is on its way), read again at
// its home; r itself when it was not starting, or still is after
// startedWait. A kill then signals it where it runs, or ends it pending
// again, rather than missing it while it starts.
func (j *Jobs) started(r job.Record) job.Record {
	for end := time.Now().Add(startedWait); r.State == job.StateStarting && time.Now().Before(end); {
		time.Sleep(20 * time.Millisecond)
		n, err := j.Record(r.ID)
		if err != nil {
			return r
		}
		r = n
	}
	return r
}

// ended clears the errors of those of res that quiet names (a sweep's
// jobs) whose job ended meanwhile (its node no longer runs it): a kill
// of a sweep ends what is left of it, and a job that ended has nothing
// left.
func (j *Jobs) ended(res []api.KillResult, quiet map[string]bool) []api.KillResult {
	for i, k := range res {
		if k.Error == "" || !quiet[k.ID] {
			continue
		}
		if r, err := j.Record(k.ID); err == nil && r.Over() {
			res[i].Error = ""
		}
	}
	return res
}

// viaSweep are the jobs of ts named by their sweep.
func viaSweep(ts []killTarget) map[string]bool {
	out := map[string]bool{}
	for _, t := range ts {
		if t.viaSweep {
			out[t.rec.ID] = true
		}
	}
	return out
}

// EndsUnstarted says whether signal sig ends a job that has not started
// (a sweep's pending one): it does when its default action would end the
// program at once; one that only stops, continues or is ignored by
// default (STOP, TSTP, TTIN, TTOU, CONT, CHLD, URG, WINCH) is not
// delivered, and the job starts as it would have.
func EndsUnstarted(sig int) bool {
	switch syscall.Signal(sig) {
	case syscall.SIGSTOP, syscall.SIGTSTP, syscall.SIGTTIN, syscall.SIGTTOU, syscall.SIGCONT, syscall.SIGCHLD, syscall.SIGURG, syscall.SIGWINCH:
		return false
	}
	return sig >= 1 && sig <= 64
}

// pendingWhy says why a pending job waits: as its home's queue said
// (waiting, by sweep id or lone job id), or, before its first round, as
// its sweep's --max-running would.
func pendingWhy(r job.Record, waiting map[string]string) string {
	key := r.Sweep.ID
	if key == "" {
		key = r.ID
	}
	pre := ""
	if !r.Preempted.IsZero() {
		pre = "preempted (had its quantum while fresh jobs of its sweep waited): runs again from its checkpoint after them; "
	}
	switch {
	case r.State != job.StatePending:
		return ""
	case waiting[key] != "":
		return pre + waiting[key]
	case r.Sweep.MaxRunning > 0:
		return pre + "--max-running " + strconv.Itoa(r.Sweep.MaxRunning) + " reached"
	}
	return pre + "waiting for its turn in its home's queue"
}
