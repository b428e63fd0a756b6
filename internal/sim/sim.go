package sim

import (
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"time"

	"roam/internal/load"
	"roam/internal/sched"
)

// epoch is virtual time 0, as the decisions' clock sees it.
var epoch = time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC)

// Sim is one run in progress. Nothing in it is shared: two Sims run
// side by side in one process.
type Sim struct {
	cfg Config
	rng *rand.Rand
	q   events
	now int64
	ids []string // node number -> id, zero-padded so that string order is number order
	// allIDs are the ids side by side, idWidth bytes each: id cuts a
	// node's id from it without reading memory (ids would be a cache miss).
	allIDs  string
	idWidth int
	nodes   []node
	procs   []proc
	free    []int32 // unused process slots
	// flights are the moves under way (rounds.go); freeFlights their
	// unused slots.
	flights     []flight
	freeFlights []int32
	pol         *sched.Scheduler
	speed       float64 // AgentModel's: 1 unless it says
	passive     bool
	placement   string
	// alive are the nodes membership has alive, ascending; nil while
	// every node is (no failure detected yet).
	alive []int32
	work  Workload // the run's copy of the Config's
	// next is the workload's next job, due at its Submit.
	next    Job
	hasNext bool
	jobSeq  int
	// scratch for a round's inputs, reused.
	inputs    roundInputs
	recentBuf []int
	decided   []sched.Node     // sched.Scheduler.DecideIn's
	placing   []sched.NodeLoad // a placement's candidates
	stats     stats
	readSum   uint8 // what readAhead read, so that the reads are kept
	begun     bool  // RunTo has started the run
	// warmup and cutoff: only processes submitted between them are
	// measured (a model's warm-up, and the end a long one might not see
	// to its end, which would bias a mean low); cutoff 0: no end.
	warmup, cutoff int64
}

// slabVector: load vectors of up to this many entries are held in one
// array for all nodes (load.NewVectorIn), allocated at once: every
// node's vector fills within seconds, and one array is one run of pages
// (huge pages, where roam sim asks for them) rather than 100,000 objects.
// A larger vector may take long to fill, and allocates as it does.
const slabVector = 16

// New builds a run of c; Run runs it.
func New(c Config) (*Sim, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	s := &Sim{cfg: c, rng: rand.New(rand.NewSource(c.Seed)), nodes: make([]node, c.Nodes), ids: make([]string, c.Nodes)}
	s.makeIDs()
	s.speed = c.Agents.speedOf()
	s.inputs.info = s.info
	var entries []load.Entry
	if !c.Oracle && c.VectorSize <= slabVector {
		entries = make([]load.Entry, c.Nodes*c.VectorSize)
	}
	for i := range s.nodes {
		n := &s.nodes[i]
		n.head, n.alive, n.believed = -1, true, true
		switch {
		case entries != nil:
			k := c.VectorSize
			n.vec = *load.NewVectorIn(k, c.VectorPolicy, entries[i*k:(i+1)*k])
		case !c.Oracle:
			n.vec = *load.NewVector(c.VectorSize, c.VectorPolicy)
		}
	}
	s.work = c.Workload.Begin(float64(c.Nodes) * c.Capacity)
	s.placement = c.Placement
	if c.Policy != "" {
		pol, err := sched.ParsePolicy([]byte(sched.Builtin[c.Policy]))
		if err != nil {
			return nil, fmt.Errorf("policy %s: %w", c.Policy, err)
		}
		s.pol, s.passive = pol, pol.Passive()
		if s.placement == "" {
			s.placement = pol.Policy.Placement
		}
	}
	if s.placement == "" {
		s.placement = "least-loaded"
	}
	s.stats.init()
	return s, nil
}

// makeIDs names the nodes by number, zero-padded so that string order
// is number order, all in one string: a load vector's search compares
// ids, and 100,000 ids side by side stay in the cache where 100,000
// strings apart would miss it at every comparison.
func (s *Sim) makeIDs() {
	width := len(strconv.Itoa(len(s.nodes) - 1))
	var b strings.Builder
	b.Grow(width * len(s.nodes))
	for i := range s.nodes {
		fmt.Fprintf(&b, "%0*d", width, i)
	}
	s.allIDs, s.idWidth = b.String(), width
	for i := range s.ids {
		s.ids[i] = s.id(int32(i))
	}
}

// id is node i's id, s.ids[i], cut from allIDs: arithmetic, where
// reading s.ids[i] would miss the cache at every message.
func (s *Sim) id(i int32) string {
	return s.allIDs[int(i)*s.idWidth : int(i+1)*s.idWidth]
}

// t is virtual nanoseconds as the decisions' clock.
func t(ns int64) time.Time { return epoch.Add(time.Duration(ns)) }

// Run runs the simulation to its Duration, from where RunTo left it,
// and returns its results.
func (s *Sim) Run() Results {
	s.RunTo(s.cfg.Duration)
	s.now = int64(s.cfg.Duration)
	return s.results()
}

// RunTo runs the simulation on to virtual time until (at most its
// Duration) and stops there, its events after until still pending: a
// caller can watch what a long run costs as it goes. Run goes on from
// there; runs in steps and in one go are the same run.
func (s *Sim) RunTo(until time.Duration) {
	if !s.begun {
		s.begun = true
		s.start()
	}
	end := int64(min(until, s.cfg.Duration))
	for s.q.len() > 0 {
		e, from := s.q.take()
		if e.at > end {
			s.q.putBack(e)
			break
		}
		s.readAhead(from)
		s.now = e.at
		s.stats.events++
		s.dispatch(e)
	}
	s.now = max(s.now, end)
}

// Now is how far the run has gone, in virtual time.
func (s *Sim) Now() time.Duration { return time.Duration(s.now) }

// start schedules each node's first tick and round at a random phase
// (agents start at different moments), the failures and the first job.
func (s *Sim) start() {
	iv := int64(s.cfg.Interval)
	for i := range s.nodes {
		if !s.cfg.Oracle {
			s.q.push(event{at: s.rng.Int63n(iv), kind: evTick, node: int32(i)})
		}
	}
	s.prefill()
	for range s.cfg.Failures {
		s.q.push(event{at: s.rng.Int63n(int64(s.cfg.Duration)), kind: evFail, node: int32(s.rng.Intn(len(s.nodes)))})
	}
	s.fetch()
}

// prefill starts Config.Prefill's processes on every node.
func (s *Sim) prefill() {
	p, ok := s.work.(*Poisson)
	if s.cfg.Prefill == nil || !ok {
		return
	}
	for i := range s.nodes {
		for range s.cfg.Prefill(s.rng) {
			s.startOn(int32(i), s.newProc(Job{Work: p.length(s.rng)}))
		}
	}
}

// fetch takes the workload's next job and schedules its arrival.
func (s *Sim) fetch() {
	j, ok := s.work.Next(s.rng)
	s.next, s.hasNext = j, ok
	if ok {
		s.q.push(event{at: max(int64(j.Submit), s.now), kind: evArrive})
	}
}

func (s *Sim) dispatch(e event) {
	switch e.kind {
	case evArrive:
		s.arrive()
	case evStart:
		s.started(e)
	case evTick:
		s.tick(e.node)
	case evRound:
		s.round(e)
	case evMsg:
		s.receive(e)
	case evDone:
		s.done(e)
	case evAdmit:
		s.admit(e)
	case evReply:
		s.reply(e)
	case evLand:
		s.land(e)
	case evFail:
		s.fail(e.node)
	case evDetect:
		s.detect(e.node)
	}
}

// send schedules an event on another node, a message's latency from now.
func (s *Sim) send(e event) {
	e.at = s.now + int64(s.cfg.Latency)
	s.stats.messages++
	s.q.push(e)
}
