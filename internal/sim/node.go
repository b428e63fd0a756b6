package sim

// Nodes and their processes. A node shares its capacity among its
// processes by processor sharing (each process one thread, at most one
// core): the kernel's fair scheduler at the scale of seconds. A node has
// one end event it relies on (node.doneAt, reschedule); the others
// pending for it are stale and do nothing.

import (
	"math"
	"strconv"

	"roam/internal/load"
	"roam/internal/resources"
	"roam/internal/sched"
)

// recentSlots bounds the senders a node remembers for its load sends'
// first target (load.Disseminator keeps a map of every sender of the
// last RecentWindow, about ten at two sends a second; the simulator the
// last recentSlots).
const recentSlots = 12

type contact struct {
	node int32
	atMs int32 // virtual milliseconds: 24 days fit
}

// node is one node: about 350 bytes here, its load vector's entries
// (128 bytes each) beside it. What a load message reads (its vector's
// keys, its contacts, its load, whether it lives) comes first, in the
// fewest cache lines.
type node struct {
	vec      load.Vector // by value: one cache miss less a message
	contacts [recentSlots]contact
	load     float64 // its smoothed load, as it sends it
	easedAt  int64   // load.Disseminator.Eased's bound
	lastTick int64
	alive    bool
	believed bool  // membership has it alive
	moved    bool  // one of the round's moves went through
	roundOn  bool  // a periodic round is pending
	n        int32 // processes running here
	ledger   sched.Ledger
	least    float64 // sched.Node.Least at its last round
	memUsed  float64 // resident memory of its processes, MiB
	lastPS   int64   // when its processes' progress was last counted
	wake     int64   // the last round's sched.Scheduler.Wake, 0 none
	rr       int     // round-robin placement's next node
	head     int32   // first process here, -1 none
	inflight int32   // moves of its last round not yet done
	doneAt   int64   // the end event relied on; 0 or past: none
	roundVer uint32
}

type procState uint8

const (
	running procState = iota
	moving
	ended
)

// proc is one process; its slot is reused once it ended.
type proc struct {
	id        string
	submit    int64
	started   int64
	lastMoved int64
	work      float64 // CPU seconds it needs
	left      float64
	attained  float64
	rssMB     float64
	next      int32
	node      int32
	moves     int32
	state     procState
}

// rate is the CPU share of each process on n.
func (s *Sim) rate(n *node) float64 { return min(1, s.cfg.Capacity/float64(n.n)) * s.speed }

// advance counts the progress of n's processes up to now.
func (s *Sim) advance(n *node) {
	if n.n > 0 && s.now > n.lastPS {
		r := s.rate(n) * float64(s.now-n.lastPS) / 1e9
		for i := n.head; i >= 0; i = s.procs[i].next {
			s.procs[i].left -= r
			s.procs[i].attained += r
		}
	}
	n.lastPS = s.now
}

// reschedule makes sure an end event is pending at or before n's next
// process end. A later end than the pending event's needs none: that
// event finds nothing done and schedules the end again. So only an
// earlier end (a process left) adds an event, and the heap does not
// fill with stale ends.
func (s *Sim) reschedule(ni int32) {
	n := &s.nodes[ni]
	if n.n == 0 {
		return
	}
	least := math.Inf(1)
	for i := n.head; i >= 0; i = s.procs[i].next {
		least = min(least, s.procs[i].left)
	}
	at := s.now + int64(math.Ceil(max(least, 0)/s.rate(n)*1e9))
	if n.doneAt > s.now && n.doneAt <= at {
		return
	}
	n.doneAt = at
	s.q.push(event{at: at, kind: evDone, node: ni})
}

// join puts process pi on node ni, running from now.
func (s *Sim) join(ni, pi int32) {
	n := &s.nodes[ni]
	s.advance(n)
	p := &s.procs[pi]
	p.node, p.next, p.state = ni, n.head, running
	n.head = pi
	n.n++
	n.memUsed += p.rssMB
	s.reschedule(ni)
}

// leave takes process pi off its node.
func (s *Sim) leave(pi int32) {
	s.unlink(pi)
	s.reschedule(s.procs[pi].node)
}

// unlink takes process pi off its node's list, its progress counted.
func (s *Sim) unlink(pi int32) {
	p := &s.procs[pi]
	n := &s.nodes[p.node]
	s.advance(n)
	for at := &n.head; *at >= 0; at = &s.procs[*at].next {
		if *at == pi {
			*at = p.next
			break
		}
	}
	n.n--
	n.memUsed -= p.rssMB
	p.next = -1
}

// done ends the processes of a node whose work is done.
func (s *Sim) done(e event) {
	n := &s.nodes[e.node]
	if e.at != n.doneAt || !n.alive {
		return // superseded by an earlier end
	}
	n.doneAt = 0
	s.advance(n)
	for i := n.head; i >= 0; {
		next := s.procs[i].next
		if s.procs[i].left <= 1e-9 {
			s.unlink(i)
			s.end(i)
		}
		i = next
	}
	s.reschedule(e.node)
}

// end records a process that ended and frees its slot.
func (s *Sim) end(pi int32) {
	p := &s.procs[pi]
	p.state = ended
	if p.submit >= s.warmup && (s.cutoff == 0 || p.submit < s.cutoff) {
		s.stats.ended(s.now, p.submit, p.work/min(1, s.cfg.Capacity))
	}
	s.free = append(s.free, pi)
}

// arrive takes the workload's job at a home node drawn at random, places
// its processes, and fetches the next job.
func (s *Sim) arrive() {
	j := s.next
	home := s.randomAlive()
	for range max(j.Procs, 1) {
		pi := s.newProc(j)
		to := s.place(home)
		if to == home {
			s.startOn(to, pi)
		} else {
			s.send(event{kind: evStart, node: to, arg: pi})
		}
	}
	s.fetch()
}

func (s *Sim) newProc(j Job) int32 {
	var pi int32
	if k := len(s.free); k > 0 {
		pi, s.free = s.free[k-1], s.free[:k-1]
	} else {
		s.procs = append(s.procs, proc{})
		pi = int32(len(s.procs) - 1)
	}
	s.jobSeq++
	rss := j.RSSMB
	if rss <= 0 {
		rss = DefaultRSSMB
	}
	s.procs[pi] = proc{id: strconv.Itoa(s.jobSeq), submit: s.now, work: j.Work, left: j.Work, rssMB: rss, next: -1, node: -1}
	s.stats.submitted++
	return pi
}

func (s *Sim) started(e event) { s.startOn(e.node, e.arg) }

// startOn starts process pi on node ni; a dead node loses it. A start is
// news for a passive policy's round there (the agent's kick).
func (s *Sim) startOn(ni, pi int32) {
	if !s.nodes[ni].alive {
		s.lost(pi)
		return
	}
	s.procs[pi].started = s.now
	s.join(ni, pi)
	s.kick(ni)
}

func (s *Sim) lost(pi int32) {
	s.procs[pi].state = ended
	s.stats.lost++
	s.free = append(s.free, pi)
}

// randomAlive draws a live node.
func (s *Sim) randomAlive() int32 {
	for {
		if i := int32(s.rng.Intn(len(s.nodes))); s.nodes[i].alive {
			return i
		}
	}
}

// place picks the node for a new process at home: by the oracle's true
// loads (the supermarket model), or by sched.Place on what home knows,
// its own smoothed load and its load vector's entries (sched.NodeLoadOf,
// as members.Table.Place builds them), as the agent does.
func (s *Sim) place(home int32) int32 {
	if s.cfg.Oracle {
		return s.placeOracle()
	}
	if s.placement == "random" {
		return s.randomAlive()
	}
	h := &s.nodes[home]
	nodes := append(s.placing[:0], sched.NodeLoad{ID: s.id(home), Capacity: s.cfg.Capacity, Load: h.load, Self: true})
	for e := range h.vec.All() {
		if info := s.info(e.Node); info.Alive {
			nodes = append(nodes, sched.NodeLoadOf(e.Node, s.cfg.Capacity, info, e, true))
		}
	}
	if len(s.nodes) <= unknownLimit {
		for i := range s.nodes {
			if id := s.id(int32(i)); s.nodes[i].believed && int32(i) != home && !inVector(&h.vec, id) {
				nodes = append(nodes, sched.NodeLoadOf(id, s.cfg.Capacity, s.info(id), load.Entry{}, false))
			}
		}
	}
	s.placing = nodes
	out, rr, err := sched.Place(s.placement, nodes, 1, resources.Request{}, s.rng, h.rr)
	h.rr = rr
	if err != nil || len(out) == 0 {
		return home
	}
	return s.index(out[0])
}

func inVector(v *load.Vector, id string) bool {
	_, ok := v.Get(id)
	return ok
}

// placeOracle places by every node's true number of processes.
func (s *Sim) placeOracle() int32 {
	at := func(i int32) sched.NodeLoad {
		return sched.NodeLoad{ID: s.id(i), Capacity: s.cfg.Capacity, Load: float64(s.nodes[i].n) / s.cfg.Capacity}
	}
	switch s.placement {
	case "random-two":
		a, b := sched.PickTwo(len(s.nodes), s.rng)
		if sched.SecondOfTwo(at(int32(a)), at(int32(b)), 1) {
			return int32(b)
		}
		return int32(a)
	case "random":
		return s.randomAlive()
	}
	all := make([]sched.NodeLoad, len(s.nodes))
	for i := range all {
		all[i] = at(int32(i))
	}
	out, err := sched.PlaceLeastLoaded(all, 1, resources.Request{})
	if err != nil {
		return 0
	}
	return s.index(out[0])
}

// index is a node id's number.
func (s *Sim) index(id string) int32 {
	i, _ := strconv.Atoi(id)
	return int32(i)
}

// fail kills node ni now: its processes are lost, its events ignored;
// membership learns of it DetectAfter later.
func (s *Sim) fail(ni int32) {
	n := &s.nodes[ni]
	if !n.alive {
		return
	}
	for i := n.head; i >= 0; {
		next := s.procs[i].next
		s.procs[i].next = -1
		s.lost(i)
		i = next
	}
	n.head, n.n, n.alive = -1, 0, false
	s.stats.failed++
	s.q.push(event{at: s.now + int64(s.cfg.DetectAfter), kind: evDetect, node: ni})
}

// detect is membership declaring node ni dead, on every node at once.
func (s *Sim) detect(ni int32) {
	s.nodes[ni].believed = false
	s.alive = s.alive[:0]
	for i := range s.nodes {
		if s.nodes[i].believed {
			s.alive = append(s.alive, int32(i))
		}
	}
}
