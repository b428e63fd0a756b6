package agent

// The scheduler's I/O: its probes (the node's load and memory, each job's
// runnable threads, memory and system calls), the rounds of the policy's
// pure decisions (internal/sched), the migrations those decide, the
// events that say why, and `roam policy`.

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/sched"
)

// maxEvents is how many decisions a node remembers for `roam events`.
const maxEvents = 500

// schedState is the scheduler's state in the agent.
type schedState struct {
	kick chan struct{}
	mu   sync.Mutex // guards everything below
	pol  *sched.Scheduler
	// polAt is when pol was loaded with `roam policy load` (on whichever
	// node); zero while it is the config file's. Nodes gossip their
	// policy, and the newest load wins: a node that was down or joins
	// later takes the cluster's policy (see gossip.go).
	polAt time.Time
	// ledger is the rounds' memory: admissions, heard loads, recent
	// moves, failed moves, and whether a round's moves still run.
	ledger sched.Ledger
	// prev are the jobs' system call counts at the last round.
	prev   map[string]ioSample
	events []api.Event
}

// admitResponse is the destination's answer to a policy's move.
type admitResponse struct {
	// Refused says why the destination will not take it; empty: taken.
	Refused string `json:"refused,omitempty"`
	// Load and MemFreeMB are the destination's now, admitted moves
	// counted in: fresher than the source's load vector.
	Load      float64 `json:"load"`
	MemFreeMB float64 `json:"mem_free_mb"`
}

// admit is the destination's side of a policy's move: the ledger judges
// it against this node's load now, the moves it admitted and has not yet
// received counted in (sched.Ledger.Admit).
func (a *Agent) admit(mv sched.Move) (admitResponse, error) {
	if mv.Job == "" || mv.To != a.cfg.NodeID {
		return admitResponse{}, errkind.New(ErrBadRequest, "move of job %q to node %q: not a move to node %s", mv.Job, mv.To, a.cfg.NodeID)
	}
	runnable, mem := a.probe.Runnable(), a.probe.MemFreeMB()
	now := time.Now()
	self := sched.Node{ID: a.cfg.NodeID, Capacity: a.capacity, Load: float64(runnable) / a.capacity, MemFreeMB: mem}
	a.sch.mu.Lock()
	ans := a.sch.ledger.Admit(mv, self, now)
	a.sch.mu.Unlock()
	r := admitResponse{Load: ans.Load, MemFreeMB: ans.MemFreeMB}
	if ans.Refused != nil {
		r.Refused = ans.Refused.Error()
	}
	return r, nil
}

// arrived ends the admission of job id's move here: it runs here now (and
// the probe counts it), or its move failed (sched.Ledger.Arrived).
func (a *Agent) arrived(id string) {
	a.sch.mu.Lock()
	a.sch.ledger.Arrived(id)
	a.sch.mu.Unlock()
}

type ioSample struct {
	at       time.Time
	syscalls uint64
}

// loadPolicy reads a built-in policy name or a policy file.
func loadPolicy(nameOrPath string) (*sched.Scheduler, error) {
	if nameOrPath == "" {
		nameOrPath = sched.DefaultPolicy
	}
	if text, ok := sched.Builtin[nameOrPath]; ok {
		return sched.ParsePolicy([]byte(text))
	}
	b, err := os.ReadFile(nameOrPath)
	if err != nil {
		return nil, fmt.Errorf("policy %s: not a built-in policy (%s) and not a readable file: %v", nameOrPath, builtinNames(), err)
	}
	return sched.ParsePolicy(b)
}

func builtinNames() string {
	var ns []string
	for n := range sched.Builtin {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return strings.Join(ns, ", ")
}

// setPolicy runs policy p, loaded at time at (see runPolicy), and keeps a
// loaded one in the job table for the next start.
func (a *Agent) setPolicy(p *sched.Scheduler, at time.Time) bool {
	if !a.runPolicy(p, at) {
		return false
	}
	if a.store != nil && !at.IsZero() {
		if err := a.store.PutPolicy(job.LoadedPolicy{Text: p.Text(), At: at}); err != nil {
			a.log.Error("job table: keep the loaded policy", "err", err)
		}
	}
	return true
}

// runPolicy runs policy p, loaded at time at, unless the running one was
// loaded later; it reports whether p now runs. Jobs are not touched: a
// round in progress finishes its moves under the old policy.
func (a *Agent) runPolicy(p *sched.Scheduler, at time.Time) bool {
	a.sch.mu.Lock()
	if at.Before(a.sch.polAt) {
		a.sch.mu.Unlock()
		return false
	}
	old := a.sch.pol
	a.sch.pol, a.sch.polAt = p, at
	a.sch.mu.Unlock()
	a.mu.Lock()
	a.placement = p.Policy.Placement
	a.mu.Unlock()
	if old != nil && old.Text() != p.Text() {
		a.event(api.Event{Kind: "policy", Why: fmt.Sprintf("policy %s replaced %s", p.Policy.Name, old.Policy.Name)})
	}
	a.kickScheduler()
	return true
}

// keptPolicy runs the policy last loaded, as this node's job table kept
// it, instead of the config's: a loaded policy outlives restarts, of this
// node or of the whole cluster, until the next load. One that does not
// parse any more (written by another roam) is logged and left.
func (a *Agent) keptPolicy() {
	kept, ok, err := a.store.Policy()
	if err != nil || !ok {
		if err != nil {
			a.log.Warn("loaded policy not restored", "err", err)
		}
		return
	}
	p, err := sched.ParsePolicy([]byte(kept.Text))
	if err != nil {
		a.log.Warn("loaded policy not restored", "err", err)
		return
	}
	a.runPolicy(p, kept.At) // already kept
	a.log.Info("loaded policy restored", "policy", p.Policy.Name, "loaded", kept.At)
}

func (a *Agent) kickScheduler() {
	select {
	case a.sch.kick <- struct{}{}:
	default:
	}
}

// event records a decision for `roam events`.
func (a *Agent) event(e api.Event) {
	if e.At.IsZero() {
		e.At = time.Now()
	}
	e.Node = a.cfg.NodeID
	a.sch.mu.Lock()
	a.sch.events = append(a.sch.events, e)
	if len(a.sch.events) > maxEvents {
		a.sch.events = a.sch.events[len(a.sch.events)-maxEvents:]
	}
	a.sch.mu.Unlock()
	a.log.Info("event", "kind", e.Kind, "job", e.Job, "from", e.From, "to", e.To, "why", e.Why)
}

// schedLoop runs the rounds, when the ledger's pacing says: each period
// of the policy, and on a kick (a job starts or ends, moves went through)
// if the policy has a passive (jobs) probe.
func (a *Agent) schedLoop() {
	defer a.wg.Done()
	for {
		now := time.Now()
		a.sch.mu.Lock()
		next := a.sch.ledger.NextRound(now, time.Duration(a.sch.pol.Policy.Period))
		a.sch.mu.Unlock()
		t := time.NewTimer(next.Sub(now))
		tr := sched.ByPeriod
		select {
		case <-a.stop:
			t.Stop()
			return
		case <-t.C:
		case <-a.sch.kick:
			t.Stop()
			tr = sched.ByKick
		}
		a.sch.mu.Lock()
		pol := a.sch.pol
		due := a.sch.ledger.RoundDue(tr, pol.Passive())
		a.sch.mu.Unlock()
		if due {
			a.round(pol)
		}
	}
}

// round takes a snapshot, decides, and starts the moves (one after the
// other, in the background), which the ledger records (Started, Finished).
// Only schedLoop calls it: no other round starts between RoundDue and
// Started.
func (a *Agent) round(pol *sched.Scheduler) {
	snap := a.snapshot()
	a.mu.Lock()
	moves := pol.Decide(snap, a.rng)
	a.mu.Unlock()
	if len(moves) == 0 {
		return
	}
	a.sch.mu.Lock()
	a.sch.ledger.Started(moves)
	a.sch.mu.Unlock()
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		moved := false
		defer func() {
			a.sch.mu.Lock()
			again := a.sch.ledger.Finished(moved)
			a.sch.mu.Unlock()
			if again {
				a.kickScheduler()
			}
		}()
		for _, mv := range moves {
			select {
			case <-a.stop:
				return
			default:
			}
			var ar admitResponse
			if err := a.peerCall(mv.To, http.MethodPost, "/v1/peer/migrate/admit", mv, &ar); err == nil && ar.Refused != "" {
				now := time.Now()
				a.sch.mu.Lock()
				a.sch.ledger.Forget(mv)
				a.sch.ledger.Heard(mv.To, ar.Load, ar.MemFreeMB, now)
				a.sch.mu.Unlock()
				a.event(api.Event{Kind: "declined", Job: mv.Job, From: a.cfg.NodeID, To: mv.To, Why: mv.Why + "; declined by node " + mv.To + ": " + ar.Refused})
				continue
			}
			m, err := a.migrateOut(migrateOutRequest{ID: mv.Job, To: mv.To, Why: mv.Why})
			e := api.Event{Kind: "migrate", Job: mv.Job, From: a.cfg.NodeID, To: mv.To, Why: mv.Why, FreezeMS: m.FreezeMS}
			if err != nil {
				now := time.Now()
				a.sch.mu.Lock()
				a.sch.ledger.Forget(mv)
				a.sch.ledger.Failed(mv.Job, now)
				a.sch.mu.Unlock()
				e.Kind, e.Why = "failed", mv.Why+"; failed: "+err.Error()
				if errors.Is(err, ErrPinned) {
					a.jobs.mu.Lock()
					if lj := a.jobs.local[mv.Job]; lj != nil {
						lj.unmovable = strings.TrimPrefix(err.Error(), mv.Job+": ")
					}
					a.jobs.mu.Unlock()
				}
			}
			moved = moved || err == nil
			a.event(e)
		}
	}()
}

// snapshot measures the node and its jobs for a round.
func (a *Agent) snapshot() sched.Snapshot {
	now := time.Now()
	runnable := a.probe.Runnable()
	mem := a.probe.MemFreeMB()
	s := sched.Snapshot{Now: now}
	a.mu.Lock()
	s.Self = sched.Node{ID: a.cfg.NodeID, Capacity: a.capacity, Load: float64(runnable) / a.capacity, MemFreeMB: mem}
	for id, p := range a.known {
		if !p.alive || id == a.cfg.NodeID {
			continue
		}
		if e, ok := a.dis.Vector.Get(id); ok {
			s.Peers = append(s.Peers, sched.Node{ID: id, Capacity: e.Capacity, Load: e.Load, MemFreeMB: e.MemFreeMB, Received: e.Received})
		}
	}
	a.mu.Unlock()
	sort.Slice(s.Peers, func(i, j int) bool { return sched.IDLess(s.Peers[i].ID, s.Peers[j].ID) })
	a.sch.mu.Lock()
	a.sch.ledger.ApplyHeard(s.Peers)
	a.sch.mu.Unlock()

	type jobRef struct {
		rec             job.Local
		unmovable       string
		migrating, done bool
	}
	a.jobs.mu.Lock()
	refs := make([]jobRef, 0, len(a.jobs.local))
	here := make([]string, 0, len(a.jobs.local))
	for id, lj := range a.jobs.local {
		refs = append(refs, jobRef{lj.rec, lj.unmovable, lj.migrating, lj.rec.Done})
		here = append(here, id)
	}
	a.jobs.mu.Unlock()
	a.sch.mu.Lock()
	defer a.sch.mu.Unlock()
	next := map[string]ioSample{}
	for _, r := range refs {
		if r.migrating || r.done || !job.Alive(r.rec.PID, r.rec.StartTix) {
			continue
		}
		if _, ended := job.ReadStatus(r.rec.Dir); ended {
			continue
		}
		run, sys, rss := job.TreeActivity(r.rec.PID)
		j := sched.Job{ID: r.rec.ID, Started: r.rec.Started, LastMoved: r.rec.LastMoved, Moves: r.rec.Moves, RSSMB: rss, Runnable: run}
		switch {
		case r.rec.Hold == "pin":
			j.Held = "pinned (run --pin)"
		case r.rec.Hold == "manual":
			j.Held = "placed by hand"
		case r.unmovable != "":
			j.Held = r.unmovable
		}
		if p, ok := a.sch.prev[j.ID]; ok && now.After(p.at) && sys >= p.syscalls {
			j.SyscallsPerSec = float64(sys-p.syscalls) / now.Sub(p.at).Seconds()
		}
		next[j.ID] = ioSample{now, sys}
		s.Jobs = append(s.Jobs, j)
	}
	a.sch.prev = next
	a.sch.ledger.ApplyFailures(s.Jobs, here)
	s.Recent = a.sch.ledger.Recent(now)
	return s
}

// releaseHold hands a job placed by hand back to the policies.
func (a *Agent) releaseHold(id string) error {
	a.jobs.mu.Lock()
	lj := a.jobs.local[id]
	if lj == nil {
		a.jobs.mu.Unlock()
		return errkind.New(ErrNotFound, "job %s is not running on node %s", id, a.cfg.NodeID)
	}
	if lj.rec.Hold == "manual" {
		lj.rec.Hold = ""
	}
	lj.unmovable = ""
	rec := lj.rec
	a.jobs.mu.Unlock()
	if err := a.store.PutLocals(rec); err != nil {
		a.log.Error("job table", "err", err)
	}
	a.kickScheduler()
	return nil
}

// ---- API ----

// PolicyOf is what `roam policy show` prints of one node.
func (a *Agent) policyText() api.NodePolicy {
	a.sch.mu.Lock()
	defer a.sch.mu.Unlock()
	return api.NodePolicy{Node: a.cfg.NodeID, Name: a.sch.pol.Policy.Name, Text: a.sch.pol.Text()}
}

// LoadPolicy is `roam policy load`: the policy (a built-in name or a
// file's text) is checked here, then given to every live node.
func (a *Agent) LoadPolicy(c Caller, req api.PolicyRequest) ([]api.NodePolicy, error) {
	if c.UID != 0 {
		return nil, errkind.New(ErrPermission, "policy load: only root changes the cluster's scheduler")
	}
	text := req.Text
	if t, ok := sched.Builtin[req.Name]; ok && text == "" {
		text = t
	} else if text == "" {
		return nil, errkind.New(ErrBadRequest, "policy %q: not a built-in policy (%s)", req.Name, builtinNames())
	}
	p, err := sched.ParsePolicy([]byte(text))
	if err != nil {
		return nil, errkind.New(ErrBadRequest, "%v", err)
	}
	at := time.Now()
	return fanOut(a, http.MethodPost, "/v1/peer/policy", api.PolicyRequest{Text: text, At: at}, func() api.NodePolicy {
		a.setPolicy(p, at)
		return a.policyText()
	}), nil
}

// Policies is `roam policy show`: every live node's policy.
func (a *Agent) Policies() []api.NodePolicy {
	return fanOut(a, http.MethodGet, "/v1/peer/policy", nil, a.policyText)
}

// Events is `roam events`: every live node's decisions since a time.
func (a *Agent) Events(since time.Time) []api.Event {
	var out []api.Event
	local := func() []api.Event { return a.localEvents(since) }
	for _, part := range fanOut(a, http.MethodGet, "/v1/peer/events?since="+since.Format(time.RFC3339Nano), nil, local) {
		out = append(out, part...)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	return out
}

func (a *Agent) localEvents(since time.Time) []api.Event {
	a.sch.mu.Lock()
	defer a.sch.mu.Unlock()
	out := []api.Event{}
	for _, e := range a.sch.events {
		if e.At.After(since) {
			out = append(out, e)
		}
	}
	return out
}

// fanOut is local's answer for this node and, in node order, the answers
// of the other live nodes to a peer call: a node that does not answer
// within psTimeout is left out, not waited for.
func fanOut[T any](a *Agent, method, path string, in any, local func() T) []T {
	a.mu.Lock()
	var nodes []string
	for id, p := range a.known {
		if p.alive {
			nodes = append(nodes, id)
		}
	}
	a.mu.Unlock()
	sort.Slice(nodes, func(i, j int) bool { return sched.IDLess(nodes[i], nodes[j]) })
	out := make([]*T, len(nodes))
	var wg sync.WaitGroup
	for i, id := range nodes {
		if id == a.cfg.NodeID {
			v := local()
			out[i] = &v
			continue
		}
		wg.Add(1)
		go func(i int, id string) {
			defer wg.Done()
			var v T
			if err := a.peerCallWithin(psTimeout, id, method, path, in, &v); err == nil {
				out[i] = &v
			} else {
				a.log.Debug("fan out", "node", id, "path", path, "err", err)
			}
		}(i, id)
	}
	wg.Wait()
	var res []T
	for _, v := range out {
		if v != nil {
			res = append(res, *v)
		}
	}
	return res
}

// schedAPI registers the CLI's routes on mux, or the peers' on peer (one
// of the two is nil).
func (a *Agent) schedAPI(mux, peer *http.ServeMux) {
	if mux == nil {
		a.peerSchedAPI(peer)
		return
	}
	mux.HandleFunc("GET /v1/policy", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.Policies())
	})
	mux.HandleFunc("POST /v1/policy", callerJSON(a.LoadPolicy))
	mux.HandleFunc("GET /v1/events", eventsSince(a.Events))
}

func (a *Agent) peerSchedAPI(peer *http.ServeMux) {
	peer.HandleFunc("POST /v1/peer/migrate/admit", jsonCall(a.admit))
	peer.HandleFunc("GET /v1/peer/policy", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, a.policyText())
	})
	peer.HandleFunc("POST /v1/peer/policy", jsonCall(func(req api.PolicyRequest) (api.NodePolicy, error) {
		p, err := sched.ParsePolicy([]byte(req.Text))
		if err != nil {
			return api.NodePolicy{}, errkind.New(ErrBadRequest, "%v", err)
		}
		if req.At.IsZero() {
			req.At = time.Now()
		}
		a.setPolicy(p, req.At)
		return a.policyText(), nil
	}))
	peer.HandleFunc("GET /v1/peer/events", eventsSince(a.localEvents))
}

// eventsSince is a handler answering with the events after ?since=.
func eventsSince(f func(time.Time) []api.Event) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		since, err := parseSince(r.URL.Query().Get("since"))
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, f(since))
	}
}

func parseSince(s string) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, errkind.New(ErrBadRequest, "since %q is not an RFC 3339 time", s)
	}
	return t, nil
}
