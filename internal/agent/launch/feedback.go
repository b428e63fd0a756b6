package launch

// The queue's second level carried out at the home (package queue,
// Preempt): after a round, for each sweep whose fresh jobs wait for
// room, the nodes running its jobs are asked to preempt as many as wait
// (peer.CkptPreempt: each node judges which, by their CPU, and keeps
// their checkpoints); a preempted job is pending again (package relay),
// and once a round gives it a node it is restarted there from its
// checkpoint (Config.Restore) rather than started. The home remembers,
// in memory, the preemptions it asked for and the restores under way,
// so that a round neither asks twice nor places a job twice; a restart
// of the home forgets them, and its first rounds ask again what is
// still true (a node refuses a second preemption of a job it is
// preempting; the home's consent refuses a second restore).

import (
	"cmp"
	"errors"
	"maps"
	"net/http"
	"slices"
	"sync"
	"time"

	"roam/internal/agent/jobtable"
	"roam/internal/agent/peer"
	"roam/internal/job"
	"roam/internal/queue"
)

// askedFor is how long a preemption asked of a node counts as under way
// without news of it (the job pending, or a failed checkpoint noted): a
// checkpoint's run ends well within peer.MigrateTimeout.
const askedFor = peer.MigrateTimeout

// askWithin bounds a node's answer to a preemption asked (it answers
// once the checkpoints have begun): the home's queue waits for it.
const askWithin = 2 * time.Second

// MaxRestoreTries bounds the restarts of a preempted job that fail
// before its home gives it up as lost, with the reason.
const MaxRestoreTries = 3

// retryAfter is how long a preempted job whose restart failed waits
// before the next, times the failures so far: a failure of the moment
// (a node's CRIU staging racing a change of its mounts, found by roam
// bench sweep on a busy machine) would otherwise use up every try within
// the same second.
const retryAfter = 2 * time.Second

// feedback is what the home remembers of its preemptions and restores.
type feedback struct {
	mu        sync.Mutex
	asked     map[string]time.Time    // preemptions asked, by job id
	restoring map[string]queue.Placed // restores under way, by job id
	failed    map[string]int          // restores failed, by job id
	retry     map[string]time.Time    // when a failed one may be tried again
	// refused is when a node last refused a restore for want of room
	// (the round's Input.Refused, as for a start).
	refused map[string]time.Time
}

func newFeedback() *feedback {
	return &feedback{asked: map[string]time.Time{}, restoring: map[string]queue.Placed{}, failed: map[string]int{}, retry: map[string]time.Time{},
		refused: map[string]time.Time{}}
}

// prepare takes the restores under way, and those that failed lately
// (until their retry), out of q's pending jobs, and counts the room of
// those under way as placed (on self, it returns it: the home's own
// node is seen as it is now, and a restore holds its room there only
// once its file has come), notes the nodes that refused a restore in
// refused, and marks the runs whose preemption was asked lately.
func (f *feedback) prepare(q *jobtable.Queued, self string, refused map[string]time.Time, now time.Time) (selfMB float64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range q.Groups {
		g := &q.Groups[i]
		g.Pending = slices.DeleteFunc(slices.Clone(g.Pending), func(j queue.Job) bool {
			_, ok := f.restoring[j.ID]
			return ok || now.Before(f.retry[j.ID])
		})
	}
	for _, p := range f.restoring {
		if p.Node == self {
			selfMB += p.MemMB
		} else {
			q.Placed = append(q.Placed, p)
		}
	}
	for n, at := range f.refused {
		if at.After(refused[n]) {
			refused[n] = at
		}
	}
	clear(f.refused)
	running := map[string]bool{}
	for i := range q.Runs {
		r := &q.Runs[i]
		running[r.ID] = true
		if at, ok := f.asked[r.ID]; ok && now.Sub(at) < askedFor {
			r.Preempting = true
		}
	}
	for id, at := range f.asked {
		if !running[id] || now.Sub(at) >= askedFor {
			delete(f.asked, id)
		}
	}
	return selfMB
}

// preemptFor asks the nodes running the jobs of each group d left short
// of room to preempt some (queue.Preempt's rule, less the CPU, which
// each node judges): at most as many of a group as wait, less those
// asked already, node by node, in id order.
func (s *Starter) preemptFor(runs []queue.Run, d queue.Decision) {
	after := s.cfg.Members.PreemptAfter()
	if after <= 0 || len(d.Short) == 0 {
		return
	}
	type nodeKey struct{ node, key string }
	ids := map[nodeKey][]string{}
	left := maps.Clone(d.Short)
	for _, r := range runs {
		switch {
		case left[r.Key] == 0:
		case r.Preempting:
			left[r.Key]--
		case r.Preempted || r.Held != "":
		default:
			if _, ok := d.RoomMB[r.Node]; ok {
				ids[nodeKey{r.Node, r.Key}] = append(ids[nodeKey{r.Node, r.Key}], r.ID)
			}
		}
	}
	for _, nk := range slices.SortedFunc(maps.Keys(ids), func(a, b nodeKey) int {
		if a.key != b.key {
			return cmp.Compare(a.key, b.key)
		}
		return cmp.Compare(a.node, b.node)
	}) {
		n := min(left[nk.key], len(ids[nk]))
		if n <= 0 {
			continue
		}
		req := peer.PreemptRequest{Home: s.cfg.Self, IDs: ids[nk], Max: n, After: after, NeedMB: d.NeedMB[nk.key], RoomMB: d.RoomMB[nk.node]}
		var ans peer.PreemptAnswer
		if err := s.cfg.Peers.CallWithin(askWithin, nk.node, http.MethodPost, peer.CkptPreempt, req, &ans); err != nil {
			s.cfg.Log.Debug("queue: preemption not asked", "node", nk.node, "err", err)
			continue
		}
		left[nk.key] -= len(ans.IDs)
		s.fb.mu.Lock()
		for _, id := range ans.IDs {
			s.fb.asked[id] = time.Now()
		}
		s.fb.mu.Unlock()
	}
}

// restore restarts the preempted jobs a round placed, each from its
// checkpoint on its node, in the background: a restore is a transfer of
// the job's memory and a run of CRIU, seconds long, and the round goes
// on.
func (s *Starter) restore(starts []queue.Start) {
	for _, st := range starts {
		rec, err := s.cfg.Jobs.HomeRecord(st.ID)
		if err != nil || rec.State != job.StatePending {
			continue
		}
		s.fb.mu.Lock()
		s.fb.restoring[st.ID] = queue.Placed{Node: st.Node, MemMB: rec.Req.MemMB(), Slots: rec.Req.Slots(), Started: time.Now()}
		s.fb.mu.Unlock()
		go s.restoreOne(rec, st.Node)
	}
}

// restoreOne restarts preempted job rec on node, and, should it fail,
// leaves it pending for another round, or lost after MaxRestoreTries.
// A node that refused it (another home took the room first, or it is not
// there) is what a refused start is: the job waits, and that node takes
// none of this home's until its next load entry. A restore refused at a
// budget (the user's checkpoint files in flight on the node that keeps
// the file, limits.checkpoints_in_flight) waits retryAfter, and is tried
// again: its files come and go with the user's other restores. Only
// other failures (the file, CRIU, its keeper gone) count toward the
// bound.
func (s *Starter) restoreOne(rec job.Record, node string) {
	err := s.cfg.Restore(rec, node)
	refused := err != nil && errors.Is(err, peer.ErrUnavailable) && rec.Newest != nil && s.cfg.Members.Alive(rec.Newest.StoredOn)
	budget := err != nil && !refused && errors.Is(err, peer.ErrLimit)
	s.fb.mu.Lock()
	delete(s.fb.restoring, rec.ID)
	tries := 0
	switch {
	case refused:
		s.fb.refused[node] = time.Now()
	case budget:
		s.fb.retry[rec.ID] = time.Now().Add(retryAfter)
	case err != nil:
		s.fb.failed[rec.ID]++
		tries = s.fb.failed[rec.ID]
		s.fb.retry[rec.ID] = time.Now().Add(time.Duration(tries) * retryAfter)
	default:
		delete(s.fb.failed, rec.ID)
		delete(s.fb.retry, rec.ID)
	}
	s.fb.mu.Unlock()
	defer s.cfg.Jobs.KickRelease()
	if err == nil {
		return
	}
	s.cfg.Log.Warn("queue: restore of a preempted job failed", "job", rec.ID, "node", node, "tries", tries, "err", err)
	if refused || budget || tries < MaxRestoreTries {
		return
	}
	s.fb.mu.Lock()
	delete(s.fb.failed, rec.ID)
	delete(s.fb.retry, rec.ID)
	s.fb.mu.Unlock()
	if err := s.cfg.Jobs.LosePreempted(rec.ID, MaxRestoreTries, err, time.Now()); err != nil {
		s.cfg.Log.Error("job table", "err", err)
	}
}
