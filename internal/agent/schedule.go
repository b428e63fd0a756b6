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
	// running is set while a round's moves are carried out.
	running bool
	recent  []sched.Move
	// prev are the jobs' system call counts at the last round.
	prev   map[string]ioSample
	events []api.Event
	// admitted are the moves this node, as a destination, agreed to take
	// and has not yet received (see admit), by job id.
	admitted map[string]admittedMove
	// heard are peers' loads from their answers to moves, used until the
	// load vector has a newer entry.
	heard map[string]heard
}

type admittedMove struct {
	runnable int
	rssMB    float64
	until    time.Time
}

// admitHold is how long an admitted move counts in this node's load if
// its job never arrives (the source gave up, or died).
const admitHold = 15 * time.Second

// admitResponse is the destination's answer to a policy's move.
type admitResponse struct {
	// Refused says why the destination will not take it; empty: taken.
	Refused string `json:"refused,omitempty"`
	// Load and MemFreeMB are the destination's now, admitted moves
	// counted in: fresher than the source's load vector.
	Load      float64 `json:"load"`
	MemFreeMB float64 `json:"mem_free_mb"`
}

// heard is a peer's load as its answer to a move gave it.
type heard struct {
	load, memFreeMB float64
	at              time.Time
}

// admit is the destination's side of a policy's move: its own load now,
// with the moves it admitted and has not yet received counted in, must
// still make the move worthwhile (sched.Admit). The source decided from a
// load-vector entry up to a second old, and two sources that saw the same
// idle node would otherwise both send it a job.
func (a *Agent) admit(mv sched.Move) (admitResponse, error) {
	if mv.Job == "" || mv.To != a.cfg.NodeID {
		return admitResponse{}, errkind.New(ErrBadRequest, "move of job %q to node %q: not a move to node %s", mv.Job, mv.To, a.cfg.NodeID)
	}
	runnable, mem := a.probe.Runnable(), a.probe.MemFreeMB()
	now := time.Now()
	a.sch.mu.Lock()
	defer a.sch.mu.Unlock()
	for id, m := range a.sch.admitted {
		// A move that arrived or failed here is gone already (arrived);
		// one whose job never came (the source gave up) goes now.
		if now.After(m.until) {
			delete(a.sch.admitted, id)
			continue
		}
		runnable += max(m.runnable, 1)
		mem -= m.rssMB
	}
	self := sched.Node{ID: a.cfg.NodeID, Capacity: a.capacity, Load: float64(runnable) / a.capacity, MemFreeMB: mem}
	if err := sched.Admit(mv, self); err != nil {
		return admitResponse{Refused: err.Error(), Load: self.Load, MemFreeMB: self.MemFreeMB}, nil
	}
	if a.sch.admitted == nil {
		a.sch.admitted = map[string]admittedMove{}
	}
	a.sch.admitted[mv.Job] = admittedMove{mv.Runnable, mv.RSSMB, now.Add(admitHold)}
	return admitResponse{}, nil
}

// arrived ends the admission of job id's move here: it runs here now (and
// the probe counts it), or its move failed. Left to the next admission,
// the reservation of a job that arrived and has ended since would count
// against this node for up to admitHold, and an idle node would refuse work.
func (a *Agent) arrived(id string) {
	a.sch.mu.Lock()
	delete(a.sch.admitted, id)
	a.sch.mu.Unlock()
}

// forget takes a move that did not happen out of the recent moves, so
// that its target's load is not counted higher for it.
func (a *Agent) forget(mv sched.Move) {
	a.sch.mu.Lock()
	defer a.sch.mu.Unlock()
	for i, m := range a.sch.recent {
		if m.Job == mv.Job && m.To == mv.To && m.At.Equal(mv.At) {
			a.sch.recent = append(a.sch.recent[:i], a.sch.recent[i+1:]...)
			return
		}
	}
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

// schedLoop runs a round each period of the policy, and at once when a
// job starts or ends if the policy has a passive (jobs) probe.
func (a *Agent) schedLoop() {
	defer a.wg.Done()
	for {
		a.sch.mu.Lock()
		period := time.Duration(a.sch.pol.Policy.Period)
		a.sch.mu.Unlock()
		t := time.NewTimer(period)
		passive := false
		select {
		case <-a.stop:
			t.Stop()
			return
		case <-t.C:
		case <-a.sch.kick:
			t.Stop()
			passive = true
		}
		a.sch.mu.Lock()
		pol := a.sch.pol
		a.sch.mu.Unlock()
		if passive && !pol.Passive() {
			continue
		}
		a.round(pol)
	}
}

// round takes a snapshot, decides, and starts the moves (one after the
// other, in the background); a round whose moves still run is skipped, and
// moves that went through are followed by a round at once.
func (a *Agent) round(pol *sched.Scheduler) {
	a.sch.mu.Lock()
	if a.sch.running {
		a.sch.mu.Unlock()
		return
	}
	a.sch.mu.Unlock()
	snap := a.snapshot()
	a.mu.Lock()
	moves := pol.Decide(snap, a.rng)
	a.mu.Unlock()
	if len(moves) == 0 {
		return
	}
	a.sch.mu.Lock()
	a.sch.running = true
	a.sch.recent = append(a.sch.recent, moves...)
	a.sch.mu.Unlock()
	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		moved := false
		defer func() {
			a.sch.mu.Lock()
			a.sch.running = false
			a.sch.mu.Unlock()
			// Jobs left: judge again now rather than a period later
			// (a round that came while these moves ran was skipped).
			if moved {
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
				a.forget(mv)
				a.sch.mu.Lock()
				if a.sch.heard == nil {
					a.sch.heard = map[string]heard{}
				}
				a.sch.heard[mv.To] = heard{ar.Load, ar.MemFreeMB, time.Now()}
				a.sch.mu.Unlock()
				a.event(api.Event{Kind: "declined", Job: mv.Job, From: a.cfg.NodeID, To: mv.To, Why: mv.Why + "; declined by node " + mv.To + ": " + ar.Refused})
				continue
			}
			m, err := a.migrateOut(migrateOutRequest{ID: mv.Job, To: mv.To, Why: mv.Why})
			e := api.Event{Kind: "migrate", Job: mv.Job, From: a.cfg.NodeID, To: mv.To, Why: mv.Why, FreezeMS: m.FreezeMS}
			if err != nil {
				a.forget(mv)
				e.Kind, e.Why = "failed", mv.Why+"; failed: "+err.Error()
				a.jobs.mu.Lock()
				if lj := a.jobs.local[mv.Job]; lj != nil {
					lj.lastTry = time.Now()
					if errors.Is(err, ErrPinned) {
						lj.unmovable = strings.TrimPrefix(err.Error(), mv.Job+": ")
					}
				}
				a.jobs.mu.Unlock()
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
	for i, p := range s.Peers {
		if h, ok := a.sch.heard[p.ID]; ok {
			if h.at.After(p.Received) {
				s.Peers[i].Load, s.Peers[i].MemFreeMB, s.Peers[i].Received = h.load, h.memFreeMB, h.at
			} else {
				delete(a.sch.heard, p.ID)
			}
		}
	}
	a.sch.mu.Unlock()

	type jobRef struct {
		rec             job.Local
		lastTry         time.Time
		unmovable       string
		migrating, done bool
	}
	a.jobs.mu.Lock()
	refs := make([]jobRef, 0, len(a.jobs.local))
	for _, lj := range a.jobs.local {
		refs = append(refs, jobRef{lj.rec, lj.lastTry, lj.unmovable, lj.migrating, lj.rec.Done})
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
		if r.lastTry.After(j.LastMoved) {
			j.LastMoved = r.lastTry
		}
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
	keep := a.sch.recent[:0]
	for _, m := range a.sch.recent {
		if now.Sub(m.At) < sched.RecentWindow {
			keep = append(keep, m)
		}
	}
	a.sch.recent = keep
	s.Recent = append([]sched.Move(nil), keep...)
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
