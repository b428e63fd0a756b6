// Package control is job control, as a shell's: `roam kill` signals jobs
// wherever they run, `roam ps` lists them from every node, and a job's
// record is looked up at its home for the commands that act on a job
// (kill, output, checkpoint, migrate), with the rule of who may touch
// one. It keeps no state and has no lock: the job table, the migrations
// in flight and the processes are their owners'. It starts no job
// (package launch does) and must not import internal/agent.
package control

import (
	"fmt"
	"net/http"
	"sort"
	"syscall"
	"time"

	"roam/internal/agent/httpx"
	"roam/internal/agent/jobtable"
	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/migrate"
)

// Config is what a Jobs is built from.
type Config struct {
	Self string // this node's id
	Jobs *jobtable.Table
	// Moves are the migrations in flight: a signal waits out a move of
	// its job, then finds it here or where it went.
	Moves jobtable.Moves
	Peers *peer.Client
	Procs job.Processes
	// SettleWait bounds a signal's wait for a migration of its job to end:
	// as long as the destination may take to restore it.
	SettleWait time.Duration
	// Attained is a job's CPU time on every node it ran on, from cpu, its
	// time here (the scheduler's count). Pure.
	Attained func(cpu float64, l job.Local) float64
	// Parts asks every live node, this one included, for its part of
	// `roam ps` (peer.PS), leaving out a node that does not answer in
	// time.
	Parts func() []peer.PSPart
}

// Jobs signals and lists jobs, and looks up their records. Safe for
// concurrent use: every call is through its owners.
type Jobs struct {
	cfg Config
}

// New builds a Jobs from its owners.
func New(c Config) *Jobs { return &Jobs{c} }

// Record returns a job's record from its home node (this one or another).
func (j *Jobs) Record(id string) (job.Record, error) {
	home, ok := migrate.JobHome(id)
	if !ok {
		return job.Record{}, errkind.New(peer.ErrBadRequest, "%q is not a job id (HOMENODE.SEQ)", id)
	}
	var r job.Record
	err := j.cfg.Peers.Call(home, http.MethodGet, peer.Record+"?id="+id, nil, &r)
	return r, err
}

// ServeRecord is /v1/peer/record: a job's record at its home.
func (j *Jobs) ServeRecord(w http.ResponseWriter, r *http.Request) {
	id := r.URL.Query().Get("id")
	if h, ok := migrate.JobHome(id); !ok || h != j.cfg.Self {
		httpx.WriteError(w, errkind.New(peer.ErrNotFound, "job %s does not have its home here", id))
		return
	}
	rec, err := j.cfg.Jobs.HomeRecord(id)
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, rec)
}

// Kill delivers a signal to jobs wherever they run: jobs named by id,
// and the jobs of sweeps named by reference (SWEEP, SWEEP:RANGES). A
// caller may signal only their own jobs, root any. A pending job is
// ended at its home as the signal would have ended it (EndsUnstarted),
// before any running job is signalled: a sweep's running jobs that end
// release its pending ones.
func (j *Jobs) Kill(c httpx.Caller, req api.KillRequest) ([]api.KillResult, error) {
	if req.Signal < 1 || req.Signal > 64 {
		return nil, errkind.New(peer.ErrBadRequest, "-s: signal %d is out of range (1 to 64)", req.Signal)
	}
	if len(req.IDs) > peer.MaxCancel {
		return nil, errkind.New(peer.ErrBadRequest, "ids: %d, more than %d", len(req.IDs), peer.MaxCancel)
	}
	ts, out, pos := j.targets(c, req.IDs)
	for i := range ts {
		ts[i].rec = j.started(ts[i].rec)
	}
	pending := map[string][]string{}
	var running []job.Record
	for _, t := range ts {
		r, id := t.rec, t.rec.ID
		switch {
		case !c.MayAct(r.UID):
			out = append(out, api.KillResult{ID: id, Error: id + ": permission denied"})
		case r.Over() && t.viaSweep:
		case r.Over():
			out = append(out, api.KillResult{ID: id, Error: fmt.Sprintf("%s: job has %s", id, r.State)})
		case r.State == job.StatePending && EndsUnstarted(req.Signal):
			pending[r.Home] = append(pending[r.Home], id)
		case r.State == job.StatePending && !t.viaSweep:
			out = append(out, api.KillResult{ID: id, Error: fmt.Sprintf("%s: job is pending; signal %d would not end it, and is not kept for its start", id, req.Signal)})
		case r.State == job.StatePending:
		case r.State == job.StateStarting:
			out = append(out, api.KillResult{ID: id, Error: fmt.Sprintf("%s: job is still starting", id)})
		default:
			running = append(running, r)
		}
	}
	out = append(out, j.endPending(pending, req.Signal)...)
	out = append(out, j.ended(j.signalAll(running, req.Signal, c.UID == 0), viaSweep(ts))...)
	sort.SliceStable(out, func(a, b int) bool { return pos[out[a].ID] < pos[out[b].ID] })
	return out, nil
}

// SignalOn signals job id, which runs on node (this one or another);
// byRoot: root sends it to another user's job.
func (j *Jobs) SignalOn(node, id string, sig int, byRoot bool) error {
	return j.cfg.Peers.Call(node, http.MethodPost, peer.Signal, peer.SignalRequest{ID: id, Signal: sig, ByRoot: byRoot}, nil)
}

// PeerSignal is /v1/peer/signal: a signal for a job running here.
func (j *Jobs) PeerSignal(req peer.SignalRequest) (struct{}, error) {
	if req.Signal < 1 || req.Signal > 64 {
		return struct{}{}, errkind.New(peer.ErrBadRequest, "signal %d", req.Signal)
	}
	return struct{}{}, j.signalHere(req.ID, syscall.Signal(req.Signal), req.ByRoot)
}

// SignalHere signals a job running here: its roam-init, which forwards the
// signal to the program's process group (SIGKILL ends the namespace).
func (j *Jobs) SignalHere(id string, sig syscall.Signal) error { return j.signalHere(id, sig, false) }

func (j *Jobs) signalHere(id string, sig syscall.Signal, byRoot bool) error {
	l, here, movedTo := j.Settled(id)
	if movedTo != "" {
		return j.SignalOn(movedTo, id, int(sig), byRoot)
	}
	if !here || !j.cfg.Procs.Alive(l.PID, l.StartTix) {
		return errkind.New(peer.ErrNotFound, "job %s is not running on node %s", id, j.cfg.Self)
	}
	if byRoot && l.UID != 0 {
		j.cfg.Jobs.RootSignals(id, int(sig))
	}
	return j.cfg.Procs.Signal(l.PID, sig)
}

// Settled waits until no migration moves job id, then returns it
// when it runs here, or the node it moved to (for a caller whose record of
// the job's node is older than the move).
func (j *Jobs) Settled(id string) (l job.Local, here bool, movedTo string) {
	deadline := time.Now().Add(j.cfg.SettleWait)
	for {
		l, here, busy, movedTo := j.cfg.Jobs.WhereIs(id, j.cfg.Moves)
		if !busy || time.Now().After(deadline) {
			return l, here, movedTo
		}
		time.Sleep(10 * time.Millisecond)
	}
}
