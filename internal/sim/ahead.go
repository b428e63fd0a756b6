package sim

// Reading ahead. At 100,000 nodes and more, an event's node, its load
// vector's entries and its processes are far apart in memory, and the
// simulator spent most of its time waiting for them, one cache miss
// after another. The events of a lane come out in the order they wait
// in, so the nodes of the next few are known: reading them a few events
// early lets their misses overlap the work on the events before them.
// Reading changes nothing; only the time an event takes.

import "unsafe"

const (
	// nodeAhead: the node of a lane's event this many places on is read,
	// and entryAhead: its vector's entries and first process, once the
	// node (which holds where they are) has come.
	nodeAhead  = 4
	entryAhead = 2
	cacheLine  = 64
)

// readAhead reads what the events of lane l to come will need.
func (s *Sim) readAhead(l int) {
	if l == noLane {
		return
	}
	if e := s.q.ahead(l, nodeAhead); e != nil {
		s.readNode(e.node)
		if e.kind == evMsg && e.to2 >= 0 {
			s.readNode(e.to2)
		}
	}
	if e := s.q.ahead(l, entryAhead); e != nil {
		s.readEntries(e)
	}
}

// readNode reads each cache line of node ni.
func (s *Sim) readNode(ni int32) {
	p := unsafe.Pointer(&s.nodes[ni])
	var sum uint8
	for off := uintptr(0); off < unsafe.Sizeof(node{}); off += cacheLine {
		sum += *(*uint8)(unsafe.Add(p, off))
	}
	sum += *(*uint8)(unsafe.Add(p, unsafe.Sizeof(node{})-1))
	s.readSum += sum
}

// readEntries reads what e's handler reads besides its node: the vector
// entry a message overwrites (the oldest, once the vector is full), all
// of them and the first process for a round.
func (s *Sim) readEntries(e *event) {
	n := &s.nodes[e.node]
	k := n.vec.Len()
	if k == 0 {
		return
	}
	switch e.kind {
	case evMsg:
		s.readSum += uint8(len(n.vec.At(0).Node))
		if e.to2 >= 0 && s.nodes[e.to2].vec.Len() > 0 {
			s.readSum += uint8(len(s.nodes[e.to2].vec.At(0).Node))
		}
	case evRound:
		for i := range k {
			s.readSum += uint8(n.vec.At(i).Received.Nanosecond())
		}
		if n.head >= 0 {
			s.readSum += uint8(s.procs[n.head].state)
		}
	}
}
