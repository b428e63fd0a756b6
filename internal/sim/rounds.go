package sim

// Scheduling rounds and moves. A round's snapshot is built as the
// agent's (scheduler.Snapshot): the node measured, its peers by
// sched.Peers from its load vector, its jobs by sched.Ledger.Complete;
// the policy decides (sched.Scheduler.Decide), the destination admits
// (sched.Ledger.Admit) and the source hears its answer (Declined), and
// the ledger paces the rounds (NextRound, RoundDue, Started, Finished).
// A node without processes runs no round: no policy moves a job it does
// not have. The moves of a round run side by side (the agent runs them
// in lanes of the policy's parallel).

import (
	"time"

	"roam/internal/load"
	"roam/internal/sched"
)

// flight is a move under way.
type flight struct {
	mv       sched.Move
	answer   sched.AdmitAnswer
	src, dst int32
	proc     int32
	next     int32 // the move after it in its lane (AgentModel.Lanes), -1 none
}

// kick runs a round at n now if the policy is passive (a job started, a
// peer has room, the last round's moves went through); a periodic round
// is scheduled if none is.
func (s *Sim) kick(ni int32) {
	if s.pol == nil {
		return
	}
	if s.passive {
		s.q.push(event{at: s.now, kind: evRound, node: ni, val: 1})
		return
	}
	s.schedule(ni, s.now)
}

// schedule puts the node's next periodic round after from, unless one
// is pending.
func (s *Sim) schedule(ni int32, from int64) {
	n := &s.nodes[ni]
	if n.roundOn {
		return
	}
	var wake time.Time
	if n.wake > 0 {
		wake = t(n.wake)
	}
	next := n.ledger.NextRound(t(from), time.Duration(s.pol.Policy.Period), wake)
	n.roundVer++
	n.roundOn = true
	s.q.push(event{at: max(int64(next.Sub(epoch)), s.now), kind: evRound, node: ni, ver: n.roundVer})
}

// round is a periodic round (val 0, if still current) or a kick's.
func (s *Sim) round(e event) {
	n := &s.nodes[e.node]
	kicked := e.val == 1
	if !kicked {
		if e.ver != n.roundVer {
			return
		}
		n.roundOn = false
	}
	if !n.alive || n.n == 0 {
		return
	}
	tr := sched.ByPeriod
	if kicked {
		tr = sched.ByKick
	}
	if n.ledger.RoundDue(tr, s.passive) {
		s.decide(e.node)
		n.roundOn = false
		n.roundVer++ // the period counts from this round
	}
	s.schedule(e.node, s.now)
}

// roundInputs are a round's inputs, raw, as the agent has them (and
// records them, package decisions): the node as measured, its load
// vector, membership's view of a node, the jobs as probed, the ids of
// those running, the ledger and the jobs' last samples (nil: none kept,
// the simulated jobs make no system calls). peers and jobs are arrays
// the snapshot is built in, kept from round to round.
type roundInputs struct {
	now    time.Time
	self   sched.Node
	vec    *load.Vector
	info   func(id string) sched.PeerInfo
	probed []sched.Probed
	here   []string
	ledger *sched.Ledger
	prev   map[string]sched.Sample
	peers  []sched.Node
	jobs   []sched.Job
}

// snapshot is the simulator's snapshot builder: a round's snapshot from
// its raw inputs, as the agent's scheduler.Snapshot builds it (the node's
// Least the round's to measure, its peers by sched.AppendPeers, its jobs
// by sched.Ledger.Complete). decide builds every round's with it, and
// TestReplayedDecisions the rounds real agents recorded. It returns what
// Complete does too: the least CPU time of a runnable job, the samples.
func (in *roundInputs) snapshot() (sched.Snapshot, float64, map[string]sched.Sample) {
	snap := sched.Snapshot{Now: in.now, Self: in.self, Jobs: in.jobs[:0]}
	snap.Self.Least = 0
	in.peers = sched.AppendPeers(in.peers[:0], snap.Self.ID, in.vec, in.info)
	snap.Peers = in.peers
	least, next := in.ledger.Complete(&snap, in.probed, in.here, in.prev)
	in.jobs = snap.Jobs
	return snap, least, next
}

// decide runs one round at node ni and starts its moves.
func (s *Sim) decide(ni int32) {
	n := &s.nodes[ni]
	in := &s.inputs
	in.now = t(s.now)
	in.self = sched.Node{ID: s.id(ni), Capacity: s.cfg.Capacity, Load: float64(n.n) / s.cfg.Capacity, MemFreeMB: s.cfg.MemMB - n.memUsed}
	in.vec, in.ledger = &n.vec, &n.ledger
	in.probed, in.here = in.probed[:0], in.here[:0]
	for i := n.head; i >= 0; i = s.procs[i].next {
		p := &s.procs[i]
		in.probed = append(in.probed, sched.Probed{Job: s.job(p), Runnable: 1})
		in.here = append(in.here, p.id)
	}
	var snap sched.Snapshot
	snap, n.least, _ = in.snapshot()
	moves := s.pol.DecideIn(snap, s.rng, &s.decided)
	n.wake = 0
	if w := s.pol.Wake(snap); !w.IsZero() {
		n.wake = int64(w.Sub(epoch))
	}
	s.stats.rounds++
	n.ledger.Started(moves)
	n.inflight += int32(len(moves))
	if s.cfg.Agents.Lanes && len(moves) > 0 {
		s.startLanes(ni, moves)
		return
	}
	for _, mv := range moves {
		s.startMove(ni, mv)
	}
}

// job is process p as a round sees it.
func (s *Sim) job(p *proc) sched.Job {
	j := sched.Job{ID: p.id, Started: t(p.started), Moves: int(p.moves), RSSMB: p.rssMB, Runnable: 1, Attained: p.attained}
	if p.moves > 0 {
		j.LastMoved = t(p.lastMoved)
	}
	return j
}

// info is membership's view of a node, for sched.Peers. Until a failure
// is detected every node is alive, and the node is not read: a round asks
// of each of its peers, each a cache miss among 100,000 nodes.
func (s *Sim) info(id string) sched.PeerInfo {
	return sched.PeerInfo{Alive: s.alive == nil || s.nodes[s.index(id)].believed}
}

// startMove asks the move's destination.
func (s *Sim) startMove(src int32, mv sched.Move) {
	fi := s.newFlight(src, mv)
	s.send(event{kind: evAdmit, node: s.flights[fi].dst, arg: fi})
}

// newFlight is the move mv from src, not yet started.
func (s *Sim) newFlight(src int32, mv sched.Move) int32 {
	var fi int32
	if k := len(s.freeFlights); k > 0 {
		fi, s.freeFlights = s.freeFlights[k-1], s.freeFlights[:k-1]
	} else {
		s.flights = append(s.flights, flight{})
		fi = int32(len(s.flights) - 1)
	}
	pi := int32(-1)
	for i := s.nodes[src].head; i >= 0; i = s.procs[i].next {
		if s.procs[i].id == mv.Job {
			pi = i
		}
	}
	s.flights[fi] = flight{mv: mv, src: src, dst: s.index(mv.To), proc: pi, next: -1}
	return fi
}

// admit is the destination judging a move against its load now.
func (s *Sim) admit(e event) {
	f := &s.flights[e.arg]
	n := &s.nodes[f.dst]
	if !n.alive {
		f.answer.Refused = errDead
	} else {
		self := sched.Node{ID: s.id(f.dst), Capacity: s.cfg.Capacity, Load: float64(n.n) / s.cfg.Capacity, MemFreeMB: s.cfg.MemMB - n.memUsed, Least: n.least}
		f.answer = n.ledger.Admit(f.mv, self, t(s.now))
	}
	s.send(event{kind: evReply, node: f.src, arg: e.arg})
}

// reply is the source hearing the answer: a refusal corrects its view of
// the destination (as rounds.Declined); a yes freezes the job for the
// migration's cost, unless it ended meanwhile (the admission withdrawn).
func (s *Sim) reply(e event) {
	f := &s.flights[e.arg]
	src := &s.nodes[f.src]
	if !src.alive {
		s.freeFlights = append(s.freeFlights, e.arg)
		s.nextInLane(f.next, f.src)
		return
	}
	now := t(s.now)
	p := s.procOf(f)
	switch {
	case f.answer.Refused != nil:
		a := f.answer
		src.ledger.Forget(f.mv)
		src.ledger.Declined(f.mv, sched.Node{ID: f.mv.To, Load: a.Load, MemFreeMB: a.MemFreeMB, Least: a.Least, MemHeldMB: a.MemHeldMB}, now)
		s.stats.refused++
		s.resolve(e.arg, false)
	case p == nil:
		s.nodes[f.dst].ledger.Withdrawn(f.mv)
		s.resolve(e.arg, false)
	case e.val == 0 && s.cfg.Agents.Prepare > 0:
		// The job runs on while the agents prepare; then the answer
		// is taken again (val 1), the job stopped if it still runs.
		s.q.push(event{at: s.now + int64(s.cfg.Agents.Prepare), kind: evReply, node: e.node, arg: e.arg, val: 1})
	default:
		s.leave(f.proc)
		p.state = moving
		s.q.push(event{at: s.now + int64(s.freeze(p)) + int64(s.cfg.Latency), kind: evLand, node: f.dst, arg: e.arg})
	}
}

// procOf is the flight's process if it still runs at the source.
func (s *Sim) procOf(f *flight) *proc {
	if f.proc < 0 {
		return nil
	}
	p := &s.procs[f.proc]
	if p.id != f.mv.Job || p.state != running || p.node != f.src {
		return nil
	}
	return p
}

// land runs a moved job at its destination.
func (s *Sim) land(e event) {
	f := &s.flights[e.arg]
	p := &s.procs[f.proc]
	if !s.nodes[f.dst].alive {
		s.lost(f.proc)
		s.resolve(e.arg, false)
		return
	}
	p.lastMoved = s.now
	p.moves++
	s.join(f.dst, f.proc)
	s.nodes[f.dst].ledger.Arrived(f.mv.Job)
	s.stats.migrations++
	s.resolve(e.arg, true)
}

// resolve ends a flight; the source's round ends with its last one
// (sched.Ledger.Finished), and a round follows at once if it says so.
func (s *Sim) resolve(fi int32, moved bool) {
	f := &s.flights[fi]
	src, next := f.src, f.next
	s.freeFlights = append(s.freeFlights, fi)
	*f = flight{}
	s.nextInLane(next, src)
	n := &s.nodes[src]
	n.moved = n.moved || moved
	if n.inflight--; n.inflight > 0 || !n.alive {
		return
	}
	var wake time.Time
	if n.wake > 0 {
		wake = t(n.wake)
	}
	again := n.ledger.Finished(n.moved, t(s.now), wake)
	n.moved = false
	if again {
		s.kick(src)
	}
}
