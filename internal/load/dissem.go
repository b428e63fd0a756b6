package load

import (
	"math/rand"
	"slices"
	"sort"
	"time"
)

// ChooseTargets picks the nodes this node sends its load to in one interval
// (seed 000 §3.1): the first among the nodes that contacted it recently, the
// second at random among all known nodes. self is never chosen. The two are
// distinct when there are at least two other nodes. With no recent contact
// both are drawn from all nodes. It returns zero, one or two node ids.
//
// Inputs are not modified; the result depends only on them and rng.
func ChooseTargets(self string, all, recent []string, rng *rand.Rand) []string {
	others := withoutSelf(self, all)
	// Only recent contacts that are still members count.
	var rec []int
	for _, n := range withoutSelf(self, recent) {
		if i, ok := slices.BinarySearch(others, n); ok {
			rec = append(rec, i)
		}
	}
	first, second := PickTargets(len(others), rec, rng)
	switch {
	case first < 0:
		return nil
	case second < 0:
		return []string{others[first]}
	}
	return []string{others[first], others[second]}
}

// PickTargets is ChooseTargets on positions, for a caller that numbers
// its nodes (the simulator, whose 100,000 nodes would make a list of
// names per send too dear): the n other nodes are 0..n-1 in
// ChooseTargets' order, recent the positions of the recent contacts
// among them, ascending. It returns the first and second target's
// positions, -1 for none, drawing from rng exactly as ChooseTargets does.
func PickTargets(n int, recent []int, rng *rand.Rand) (first, second int) {
	if n == 0 {
		return -1, -1
	}
	if len(recent) > 0 {
		first = recent[rng.Intn(len(recent))]
	} else {
		first = rng.Intn(n)
	}
	if n == 1 {
		return first, -1
	}
	// The others without the first, in order: position k is k, or k+1
	// past the first.
	second = rng.Intn(n - 1)
	if second >= first {
		second++
	}
	return first, second
}

// withoutSelf returns the sorted, de-duplicated ids other than self, so that
// the choice does not depend on the order the caller listed them in.
func withoutSelf(self string, ids []string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if id != self && id != "" {
			out = append(out, id)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// Disseminator is the dissemination protocol of one node as a step machine:
// the agent calls Tick every interval and Receive for every load message, and
// does the sending itself.
type Disseminator struct {
	Self     string
	Vector   *Vector
	Interval time.Duration
	// RecentWindow is how long a sender counts as a recent contact.
	RecentWindow time.Duration

	lastContact map[string]time.Time // sender -> last time it sent us its load
	nextTick    time.Time
	nextNews    time.Time
	jobs        int       // the job count at the last News
	easedAt     time.Time // the last time Eased said yes
}

// NewDisseminator makes the protocol state for node self.
func NewDisseminator(self string, size int, policy Policy, interval time.Duration) *Disseminator {
	return &Disseminator{
		Self:         self,
		Vector:       NewVector(size, policy),
		Interval:     interval,
		RecentWindow: DefaultRecentWindow,
		lastContact:  map[string]time.Time{},
	}
}

// Recent returns the senders heard from within RecentWindow before now.
func (d *Disseminator) Recent(now time.Time) []string {
	var out []string
	for n, t := range d.lastContact {
		if now.Sub(t) <= d.RecentWindow {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// Tick returns the nodes to send our own load to, or nil when the interval
// has not elapsed since the last send. members are the live nodes.
func (d *Disseminator) Tick(now time.Time, members []string, rng *rand.Rand) []string {
	if now.Before(d.nextTick) {
		return nil
	}
	d.nextTick = now.Add(d.Interval)
	// Drop contacts too old to matter, so the map stays bounded by the
	// cluster's size.
	for n, t := range d.lastContact {
		if now.Sub(t) > d.RecentWindow {
			delete(d.lastContact, n)
		}
	}
	return ChooseTargets(d.Self, members, d.Recent(now), rng)
}

// News returns the nodes to send this node's load to now, out of turn,
// when one of its jobs ended or left: jobs, the number of jobs it holds,
// is lower than at the last call; its load (load, runnable threads per
// unit of capacity as the probe read it now) is three quarters of a
// thread or more below the load it sends (sent, the smoothed one, which
// nears a step's height but never reaches it), or the node is idle now
// (load 0: a job that ended soon after it came had not raised the
// smoothed load by that much, and the busier nodes would see it for a
// second more); and the vector holds
// nodes more loaded than this one with one more thread, which would gain
// by sending it a job. A node that goes idle is otherwise heard of a
// second or more later, and its smoothed load takes another second to
// fall: time its CPU is lost while others queue (seed 000's 8 jobs on 3
// or 6 nodes). A job that sleeps for a moment changes no count, so its
// dip in the load is no news: it stays the smoothing's to hide. The
// caller sends load, not the smoothed value: a job's end is not noise.
// At most once per quarter interval (a fall held back then is news at
// the next call); nil when nothing is news.
func (d *Disseminator) News(now time.Time, jobs int, load, sent, capacity float64) []string {
	fell := jobs < d.jobs
	if !fell || now.Before(d.nextNews) {
		if !fell {
			d.jobs = jobs
		}
		return nil
	}
	d.jobs = jobs
	if capacity <= 0 || sent-load < 0.75/capacity && !(load == 0 && sent > 0) {
		return nil
	}
	var out []string
	for _, e := range d.Vector.entries {
		if e.Load > load+1/capacity {
			out = append(out, e.Node)
		}
	}
	if len(out) == 0 {
		return nil
	}
	sort.Strings(out)
	d.nextNews = now.Add(d.Interval / 4)
	return out
}

// Eases says whether entry e, received in place of prev (had: there was
// one), is news for this node's scheduler: node e.Node could now take
// one of this node's threads and stay below selfLoad, and prev did not
// show that (or showed a load higher by at least half a thread). The
// agent then runs a round at once instead of at its period.
func Eases(prev Entry, had bool, e Entry, selfLoad float64) bool {
	room := func(x Entry) bool { return x.Capacity > 0 && x.Load+1/x.Capacity < selfLoad }
	return room(e) && (!had || !room(prev) || e.Load <= prev.Load-0.5/e.Capacity)
}

// Eased is Eases bounded: yes at most once per quarter interval, so that a
// stream of loads cannot run this node's scheduler without end. The
// caller asks only of an entry the vector kept, from a live member.
func (d *Disseminator) Eased(now time.Time, prev Entry, had bool, e Entry, selfLoad float64) bool {
	if !Eases(prev, had, e, selfLoad) || !EaseDue(now, d.easedAt, d.Interval) {
		return false
	}
	d.easedAt = now
	return true
}

// EaseDue is Eased's bound: an entry that eases may run a round at now
// if the last one that did (at last) was a quarter interval ago or more.
func EaseDue(now, last time.Time, interval time.Duration) bool {
	return !now.Before(last.Add(interval / 4))
}

// Receive takes a load entry sent by another node. localLoad is our own load
// now. It reports whether the vector kept the entry.
func (d *Disseminator) Receive(now time.Time, e Entry, localLoad float64) bool {
	if e.Node == d.Self {
		return false
	}
	d.lastContact[e.Node] = now
	e.Received = now
	return d.Vector.Update(e, localLoad)
}

// Forget drops everything known about a node that left the cluster.
func (d *Disseminator) Forget(node string) {
	delete(d.lastContact, node)
	d.Vector.Forget(node)
}
