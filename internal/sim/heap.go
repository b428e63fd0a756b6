package sim

// kind is what an event does.
type kind uint8

const (
	evArrive kind = iota // the workload's next job arrives at its home
	evStart              // a placed job reaches the node it was placed on
	evTick               // a node probes its load and sends it (gossip)
	evRound              // a node's scheduling round
	evMsg                // a load message reaches a node
	evDone               // the first process on a node ends (if ver still holds)
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
	ver  uint32
	kind kind
}

// events is a binary min-heap on (at, seq), written out rather than
// container/heap's, whose interface boxes every event.
type events struct {
	h   []event
	seq uint64
}

func (q *events) push(e event) {
	q.seq++
	e.seq = q.seq
	q.h = append(q.h, e)
	i := len(q.h) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !q.less(i, p) {
			break
		}
		q.h[i], q.h[p] = q.h[p], q.h[i]
		i = p
	}
}

func (q *events) less(i, j int) bool {
	a, b := &q.h[i], &q.h[j]
	return a.at < b.at || a.at == b.at && a.seq < b.seq
}

func (q *events) pop() event {
	top := q.h[0]
	last := len(q.h) - 1
	q.h[0] = q.h[last]
	q.h = q.h[:last]
	i := 0
	for {
		l, r, m := 2*i+1, 2*i+2, i
		if l < last && q.less(l, m) {
			m = l
		}
		if r < last && q.less(r, m) {
			m = r
		}
		if m == i {
			return top
		}
		q.h[i], q.h[m] = q.h[m], q.h[i]
		i = m
	}
}
