package sim

// kind is what an event does.
type kind uint8

const (
	evArrive kind = iota // the workload's next job arrives at its home
	evStart              // a placed job reaches the node it was placed on
	evTick               // a node probes its load and sends it (gossip)
	evRound              // a node's scheduling round
	evMsg                // a load message reaches a node
	evDone               // a node's first process ends (if it is the node's doneAt)
	evAdmit              // a move reaches its destination, which judges it
	evReply              // the destination's answer reaches the source
	evLand               // a moved job runs at its destination
	evFail               // a node dies
	evDetect             // membership learns that a node died
)

// event is one pending event: 56 bytes, so that 100,000 nodes' pending
// ticks, rounds, completions and messages stay a few MB.
type event struct {
	at   int64  // virtual nanoseconds
	seq  uint64 // order of scheduling: ties at one instant run in it
	node int32
	to2  int32   // a load message's second receiver, -1 none (see tick)
	arg  int32   // the sender, process or move, by kind
	val  float64 // a load message's load
	val2 float64 // a load message's least CPU time
	mem  float32 // a load message's free memory, MiB
	ver  uint32  // a periodic round's version
	kind kind
}

// events are the pending events: a 4-ary min-heap on (at, seq),
// written out rather than container/heap's, whose interface boxes every
// event, and beside it lanes, queues each in order of (at, seq). Most
// events are scheduled a constant delay after now (a message one
// latency, a tick and a periodic round one interval, a kick's round
// none), so those of one kind are scheduled in the order they are due:
// an event that is due no earlier than its lane's last one joins the
// lane, in order, without a heap's work; one that is due earlier (a
// round woken early, the first ticks' random phases) goes to the heap.
// Every order is the one order on (at, seq), whichever holds an event.
type events struct {
	h     []event
	lanes [nLanes]lane
	seq   uint64
}

// Lanes by kind of event; noLane: the heap's.
const (
	laneMsg = iota
	laneTick
	laneRound
	laneKick
	nLanes
	noLane = -1
)

// lane is a queue of events in order of (at, seq), from head on.
type lane struct {
	buf  []event
	head int
}

func (l *lane) len() int { return len(l.buf) - l.head }

// add appends e if it is due no earlier than the last event queued.
func (l *lane) add(e event) bool {
	if l.head < len(l.buf) && l.buf[len(l.buf)-1].at > e.at {
		return false
	}
	if l.head > 0 && l.head >= len(l.buf)/2 {
		l.buf = l.buf[:copy(l.buf, l.buf[l.head:])]
		l.head = 0
	}
	l.buf = append(l.buf, e)
	return true
}

func (q *events) len() int {
	n := len(q.h)
	for i := range q.lanes {
		n += q.lanes[i].len()
	}
	return n
}

// laneOf is the lane an event of e's kind is tried in.
func laneOf(e *event) int {
	switch e.kind {
	case evMsg, evStart, evAdmit, evReply:
		return laneMsg
	case evTick:
		return laneTick
	case evRound:
		if e.val == 1 {
			return laneKick
		}
		return laneRound
	}
	return noLane
}

func (q *events) push(e event) {
	q.seq++
	e.seq = q.seq
	if l := laneOf(&e); l != noLane && q.lanes[l].add(e) {
		return
	}
	q.putBack(e)
}

// putBack queues e, taken from the queue, again in its place: the heap
// keeps any event in its order on (at, seq), which e keeps.
func (q *events) putBack(e event) {
	q.h = append(q.h, e)
	i := len(q.h) - 1
	for i > 0 {
		p := (i - 1) / 4
		if !before(&q.h[i], &q.h[p]) {
			break
		}
		q.h[i], q.h[p] = q.h[p], q.h[i]
		i = p
	}
}

func before(a, b *event) bool { return a.at < b.at || a.at == b.at && a.seq < b.seq }

// pop takes the first pending event; there must be one.
func (q *events) pop() event {
	e, _ := q.take()
	return e
}

// take is pop, and the lane the event came from (noLane: the heap's).
func (q *events) take() (event, int) {
	first := noLane
	var min *event
	if len(q.h) > 0 {
		min = &q.h[0]
	}
	for i := range q.lanes {
		if l := &q.lanes[i]; l.head < len(l.buf) && (min == nil || before(&l.buf[l.head], min)) {
			first, min = i, &l.buf[l.head]
		}
	}
	if first != noLane {
		l := &q.lanes[first]
		l.head++
		return l.buf[l.head-1], first
	}
	return q.popHeap(), noLane
}

// ahead is the event k places behind the head of lane l, nil if there
// is none.
func (q *events) ahead(l, k int) *event {
	if l == noLane {
		return nil
	}
	ln := &q.lanes[l]
	if i := ln.head + k; i < len(ln.buf) {
		return &ln.buf[i]
	}
	return nil
}

func (q *events) popHeap() event {
	top := q.h[0]
	last := len(q.h) - 1
	q.h[0] = q.h[last]
	q.h = q.h[:last]
	i := 0
	for {
		m, first := i, 4*i+1
		for c := first; c < first+4 && c < last; c++ {
			if before(&q.h[c], &q.h[m]) {
				m = c
			}
		}
		if m == i {
			return top
		}
		q.h[i], q.h[m] = q.h[m], q.h[i]
		i = m
	}
}
