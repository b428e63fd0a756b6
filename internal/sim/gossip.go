package sim

// The load gossip: each node, every interval, smooths its load and sends
// it to the targets package load picks (load.PickTargets, the draws of
// the agent's load.ChooseTargets), and takes its peers' loads into its
// load vector (load.Vector.Update, the agent's). The agent probes four
// times an interval and smooths each probe; the simulator probes once,
// at the send, with the same time constant (one interval). Not modelled:
// the out-of-turn sends of a node whose job ended (load.Disseminator.News)
// or whose room for memory requests changed (load.RoomNews; the
// simulated jobs request none), and memberlist's own gossip, which
// membership's detection delay stands for.

import (
	"slices"
	"time"

	"roam/internal/load"
	"roam/internal/sched"
)

// tick is one node's load send, and the next one scheduled.
func (s *Sim) tick(ni int32) {
	n := &s.nodes[ni]
	if !n.alive {
		return
	}
	raw := float64(n.n) / s.cfg.Capacity
	n.load = load.Smooth(n.load, raw, time.Duration(s.now-n.lastTick), s.cfg.Interval)
	n.lastTick = s.now
	pending := n.ledger.Reserved(sched.Node{Capacity: s.cfg.Capacity, Least: n.least}, t(s.now))
	msg := event{kind: evMsg, arg: ni, to2: -1, val: n.load + pending.Load, val2: pending.Least, mem: float32(s.cfg.MemMB - n.memUsed)}
	first, second := load.PickTargets(s.others(), s.recent(ni), s.rng)
	// The two messages arrive at one instant, one after the other, with
	// nothing between them: one event carries both (half the queue's work).
	if first >= 0 {
		msg.node = s.nth(ni, first)
		if second >= 0 {
			msg.to2 = s.nth(ni, second)
			s.stats.messages++
		}
		s.send(msg)
	}
	s.q.push(event{at: s.now + int64(s.cfg.Interval), kind: evTick, node: ni})
}

// ageStride: one message in ageStride has an entry's age sampled. A
// sample reads an entry no other work of the message reads, a cache miss
// among 100,000 nodes' vectors (a sixth of the simulator's time when
// every message took one); one in eight still samples a 256-node minute
// some 4,000 times.
const ageStride = 8

// sampleAge records the age of one entry of n's vector, a different one
// each time, as every ageStride-th message arrives (before it enters):
// messages come at times that do not depend on the ages, nor does the
// count that picks them, so the mean over many is the mean age of the
// vectors' entries.
func (s *Sim) sampleAge(n *node) {
	if s.stats.msgN++; s.stats.msgN%ageStride != 0 {
		return
	}
	if k := n.vec.Len(); k > 0 {
		e := n.vec.At(int(s.stats.ageN % uint64(k)))
		s.stats.age(s.now - int64(e.Received.Sub(epoch)))
	}
}

// others is how many nodes a node sends among: the live members but
// itself (a dead node sends nothing).
func (s *Sim) others() int {
	if s.alive == nil {
		return len(s.nodes) - 1
	}
	return len(s.alive) - 1
}

// nth is the pos-th node but self among the live members, ascending.
func (s *Sim) nth(self int32, pos int) int32 {
	if s.alive == nil {
		if int32(pos) >= self {
			return int32(pos) + 1
		}
		return int32(pos)
	}
	if k, _ := slices.BinarySearch(s.alive, self); pos >= k {
		pos++
	}
	return s.alive[pos]
}

// position is node's position among the live members but self, -1 if
// it is not one.
func (s *Sim) position(self, node int32) int {
	if node == self || s.alive != nil && !s.nodes[node].believed {
		return -1
	}
	pos := int(node)
	if s.alive != nil {
		pos, _ = slices.BinarySearch(s.alive, node)
	}
	if node > self {
		pos--
	}
	return pos
}

// recent are the positions of the senders heard from within
// Config.RecentWindow, ascending.
func (s *Sim) recent(ni int32) []int {
	n := &s.nodes[ni]
	out := s.recentBuf[:0]
	if s.cfg.RecentWindow < 0 {
		return out
	}
	nowMs := int32(s.now / 1e6)
	for _, c := range n.contacts {
		if c.atMs > 0 && nowMs-c.atMs <= int32(s.cfg.RecentWindow/time.Millisecond) {
			if pos := s.position(ni, c.node); pos >= 0 {
				out = append(out, pos)
			}
		}
	}
	insertionSort(out)
	s.recentBuf = out
	return out
}

// insertionSort sorts a node's few recent senders (at most recentSlots)
// in place: slices.Sort's general path cost a tick more than its draws.
func insertionSort(a []int) {
	for i := 1; i < len(a); i++ {
		for j := i; j > 0 && a[j] < a[j-1]; j-- {
			a[j], a[j-1] = a[j-1], a[j]
		}
	}
}

// receive takes a load message into the node's vector (what
// load.Disseminator.Receive does, with the contacts kept in slots), and
// kicks a round when the entry eases this node (load.Eases and EaseDue,
// as load.Disseminator.Eased).
func (s *Sim) receive(e event) {
	s.receiveAt(e)
	if e.to2 >= 0 {
		e.node = e.to2
		s.stats.events++ // counted as the two events they were
		s.receiveAt(e)
	}
}

// receiveAt takes a load message at e.node.
func (s *Sim) receiveAt(e event) {
	n := &s.nodes[e.node]
	if !n.alive {
		return
	}
	s.contact(n, e.arg)
	s.sampleAge(n)
	id := s.id(e.arg)
	entry := load.Entry{Node: id, Capacity: s.cfg.Capacity, Load: e.val, MemFreeMB: float64(e.mem), Least: e.val2, Received: t(s.now)}
	// Eases with no previous entry is whether the entry shows room at
	// all: without room, no previous entry makes it news, and the vector
	// need not be searched for one.
	room := s.pol != nil && load.Eases(load.Entry{}, false, entry, n.load)
	var prev load.Entry
	var had bool
	if room {
		prev, had = n.vec.Get(id)
	}
	kept := n.vec.Update(entry, n.load)
	if room && kept && (s.alive == nil || s.nodes[e.arg].believed) && load.Eases(prev, had, entry, n.load) && load.EaseDue(t(s.now), t(n.easedAt), s.cfg.Interval) {
		n.easedAt = s.now
		s.kick(e.node)
	}
}

// contact records a sender: its slot refreshed, or the oldest slot's.
func (s *Sim) contact(n *node, from int32) {
	at := int32(s.now/1e6) + 1 // 0 is an empty slot
	old := 0
	for i, c := range n.contacts {
		if c.node == from && c.atMs > 0 {
			n.contacts[i].atMs = at
			return
		}
		if c.atMs < n.contacts[old].atMs {
			old = i
		}
	}
	n.contacts[old] = contact{node: from, atMs: at}
}
