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
	arg  int32   // the sender, process or move, by kind
	val  float64 // a load message's load
	val2 float64 // a load message's least CPU time
	mem  float32 // a load message's free memory, MiB
	ver  uint32  // a periodic round's version
	kind kind
}

// events are the pending events: a 4-ary min-heap on (at, seq),
// written out rather than container/heap's, whose interface boxes every
// event, and a queue of the messages. Every message takes the one
// latency, so messages arrive in the order they were sent: the queue
// holds them in order without a heap's work, and they are two thirds of
// all events.
type events struct {
	h    []event
	msgs []event // from head on, in order of (at, seq)
	head int
	seq  uint64
}

func (q *events) len() int { return len(q.h) + len(q.msgs) - q.head }

func (q *events) push(e event) {
	q.seq++
	e.seq = q.seq
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

// pushMsg queues a message, which must arrive no earlier than every
// message queued before it.
func (q *events) pushMsg(e event) {
	q.seq++
	e.seq = q.seq
	if q.head > 0 && q.head >= len(q.msgs)/2 {
		q.msgs = q.msgs[:copy(q.msgs, q.msgs[q.head:])]
		q.head = 0
	}
	q.msgs = append(q.msgs, e)
}

func before(a, b *event) bool { return a.at < b.at || a.at == b.at && a.seq < b.seq }

// pop takes the first pending event; there must be one.
func (q *events) pop() event {
	if q.head < len(q.msgs) && (len(q.h) == 0 || before(&q.msgs[q.head], &q.h[0])) {
		q.head++
		return q.msgs[q.head-1]
	}
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
