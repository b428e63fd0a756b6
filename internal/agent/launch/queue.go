package launch

// The home's queue carried out: a round of package queue over every
// pending job of this home (a sweep's held back by its --max-running, or
// any job that had no room on any node), when room may have come; the
// jobs it picks start on their nodes, each on its own: one its node
// refuses (another home took the room first) is pending again, and the
// others run.

import (
	"errors"
	"maps"
	"net/http"
	"slices"
	"sync"
	"syscall"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/cpufeat"
	"roam/internal/job"
	"roam/internal/queue"
	"roam/internal/sched"
)

// releaseEvery is how often a home looks at its pending jobs without
// being kicked: room that came without news (a job that moved away, a
// load entry the vector did not keep) is found so.
const releaseEvery = time.Second

// roundsAtOnce bounds the rounds run one after the other, each full
// (queue.RoundMax), before the loop waits for a kick or its tick.
const roundsAtOnce = 16

// placeNow places the jobs of plan p (of --on on) that start at once.
// Those of a run that asks for memory start from the queue, all of them:
// its round, kicked once they are recorded, places them where there is
// room and starts them one by one (a node that refuses one, because
// another home took the room first, leaves it pending, not the run
// failed), and it is fair between users where placement is not. Such a
// run is refused here only when it never fits: larger than any node's
// memory for jobs (sched.ErrTooLarge), or --on a node that is not alive,
// is draining or is too small.
func (s *Starter) placeNow(on string, p plan) ([]string, string, error) {
	held := float64(s.cfg.Jobs.MemHeld(""))/(1<<20) + s.cfg.Admitted("")
	n := p.startNow()
	if p.spec.Req.MemBytes > 0 {
		n = min(n, 1)
	}
	targets, why, err := s.cfg.Members.Place(on, n, s.cfg.Draining(), p.spec.Req, held, cpufeat.Set{}, p.within)
	switch {
	case p.spec.Req.MemBytes == 0:
		return targets, why, err
	case err != nil && !errors.Is(err, sched.ErrNoRoom):
		return nil, "", err
	}
	return nil, "", nil
}

// ReleaseLoop runs the queue's rounds: when room may have come (the job
// table's kick: a job of this home ended, a job here left its room, a
// load entry shows room) and every releaseEvery. The nodes that refused
// a start are its own state, passed to each round. It returns once stop
// closes.
func (s *Starter) ReleaseLoop(stop <-chan struct{}) {
	t := time.NewTicker(releaseEvery)
	defer t.Stop()
	refused, orphaned := map[string]time.Time{}, newOrphans()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		case <-s.cfg.Jobs.ReleaseKicked():
		}
		for range roundsAtOnce {
			if !s.round(refused, orphaned) {
				break
			}
		}
	}
}

// round runs one round of the queue and starts what it picks; the
// nodes that refuse a start are noted in refused, and o is what
// endOrphans keeps between rounds. It says whether the
// round stopped at its bound with more to start. One round runs at a
// time (the loop's): two could start more than a sweep's --max-running
// or a node's room.
func (s *Starter) round(refused map[string]time.Time, o *orphans) (more bool) {
	q := s.cfg.Jobs.Queue(s.cfg.Members.OldestHeard().Add(-queue.EntrySlack))
	q.Groups = s.endOrphans(q.Groups, o, time.Now())
	restoringHere := s.fb.prepare(&q, s.cfg.Self, refused, time.Now())
	held := float64(s.cfg.Jobs.MemHeld(""))/(1<<20) + s.cfg.Admitted("") + restoringHere
	in := queue.Input{Groups: q.Groups, Running: q.Running, Placed: q.Placed, Refused: refused, Max: queue.RoundMax}
	d := s.cfg.Members.Release(in, s.cfg.Draining(), held)
	s.cfg.Jobs.SetWaiting(d.Why, d.ForRoom)
	s.preemptFor(q.Runs, d)
	var restores []queue.Start
	nodes := make(map[string]string, len(d.Starts))
	for _, st := range d.Starts {
		if st.Restore {
			restores = append(restores, st)
		} else {
			nodes[st.ID] = st.Node
		}
	}
	s.restore(restores)
	if len(nodes) == 0 {
		return d.Full
	}
	now := time.Now()
	why := s.release(nodes)
	for _, st := range d.Starts {
		if w, ok := why[st.ID]; ok {
			refused[st.Node] = now
			if d.Why[st.Key] == "" {
				d.Why[st.Key] = "node " + st.Node + " refused its start (" + w + "); tried again elsewhere, or there once its load entry shows room"
			}
		}
	}
	if len(why) > 0 {
		s.cfg.Jobs.SetWaiting(d.Why, true)
	}
	return d.Full
}

// release starts pending jobs on the nodes given (by job id): their
// records turn starting, their nodes start them, and they turn running;
// one its node refused, or whose node did not answer, is pending again.
// It returns those, with why.
func (s *Starter) release(nodes map[string]string) (back map[string]string) {
	recs, err := s.cfg.Jobs.ReleasePending(nodes, time.Now())
	if err != nil {
		s.cfg.Log.Error("job table", "err", err)
		return nil
	}
	byNode := map[string][]job.Spec{}
	byID := map[string]job.Record{}
	for _, r := range recs {
		byNode[r.Node] = append(byNode[r.Node], specOf(r))
		byID[r.ID] = r
	}
	started, back := s.startEach(byNode)
	var ok, again []job.Record
	for _, id := range slices.Sorted(maps.Keys(started)) {
		r := byID[id]
		ok = append(ok, r)
		uid := r.UID
		s.cfg.Event(api.Event{Kind: "place", Job: id, UID: &uid, To: r.Node, Why: "its turn in its home's queue"})
	}
	for id := range back {
		again = append(again, byID[id])
	}
	if err := s.cfg.Jobs.Unrelease(again); err != nil {
		s.cfg.Log.Error("job table", "err", err)
	}
	if err := s.cfg.Jobs.MarkStarted(ok, started); err != nil {
		s.cfg.Log.Error("job table", "err", err)
	}
	return back
}

// startEach has each node start its specs, and returns the ids it
// started, each with its start by this node's clock, and those it did
// not (pending again) with why. A node that
// did not answer may have started its share: those are killed there, by
// id, and pending again (should the kill not reach it, the home refuses
// their news, and their node ends them: jobtable's Known).
func (s *Starter) startEach(byNode map[string][]job.Spec) (started map[string]time.Time, back map[string]string) {
	results := s.nodeStarts(byNode)
	started, back = map[string]time.Time{}, map[string]string{}
	var wg sync.WaitGroup
	for range byNode {
		r := <-results
		answered := map[string]bool{}
		for _, x := range r.res {
			answered[x.ID] = true
			if x.Error != "" {
				back[x.ID] = x.Error
				s.cfg.Log.Debug("queue: a node refused a start; pending again", "job", x.ID, "node", r.node, "why", x.Error)
			} else {
				started[x.ID] = x.At
			}
		}
		if r.err == nil {
			continue
		}
		s.cfg.Log.Warn("queue: starts on a node failed; pending again", "node", r.node, "err", r.err)
		for _, sp := range byNode[r.node] {
			if !answered[sp.ID] {
				back[sp.ID] = r.err.Error()
				wg.Go(func() {
					_ = s.cfg.Peers.Call(r.node, http.MethodPost, peer.Signal, peer.SignalRequest{ID: sp.ID, Signal: int(syscall.SIGKILL)}, nil)
				})
			}
		}
	}
	wg.Wait()
	return started, back
}
