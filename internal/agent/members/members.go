// Package members is the agent's membership, one owner with one lock:
// every node memberlist told of (its peer address, capacity, liveness,
// draining flag and version), the load vector of package load, this
// node's own measured load and memory, and the placement of new jobs
// that reads them. memberlist's callbacks call into it and it never
// waits on anything but its own lock: it reads no /proc and calls no
// peer. The agent sends what it decides (load messages) and logs what
// changed.
package members

import (
	"errors"
	"math/rand"
	"net"
	"slices"
	"sort"
	"strconv"
	"time"

	"roam/internal/agent/config"
	"roam/internal/agent/peer"
	"roam/internal/cpufeat"
	"roam/internal/errkind"
	"roam/internal/load"
	"roam/internal/lockorder"
	"roam/internal/resources"
	"roam/internal/sched"
	"roam/internal/slurm"
)

// Member is what the agent knows of a member from memberlist.
type Member struct {
	Addr     string // gossip host:port
	PeerAddr string // TLS host:port
	Capacity float64
	Alive    bool
	Since    time.Time // when it last became alive or dead
	Draining bool      // it says so in its metadata (roam node drain)
	Version  string    // its roam version, from its metadata
	UserNS   bool      // its users' jobs run in user namespaces (metadata)
	// LazyUserNS: it restores jobs lazily inside their own user
	// namespaces (metadata).
	LazyUserNS bool
	// Host is its CPU's features, its CPU's model, its kernel and CRIU
	// (metadata, bounded): a job's image goes there only when its CPU
	// has every feature of the one the job started on.
	Host cpufeat.Host
	// FenceKill is its fence.kill (metadata, bounded; 0: unknown).
	FenceKill time.Duration
	// Slurm is its name in Slurm (metadata, checked): the allocations
	// whose node lists name it may place jobs there.
	Slurm string
}

// Config is what a Table is built from.
type Config struct {
	Self     string  // this node's id
	Capacity float64 // this node's capacity, in cores
	// Tau is the time constant of the node's smoothed load.
	Tau       time.Duration
	Vector    *load.Disseminator
	Rng       *rand.Rand
	Placement string // the policy's placement
	// JobMemMB is the memory this node gives its jobs' requests, in MiB
	// (jobs.memory_bytes; 0: not counted), which its load entries say.
	JobMemMB float64
	// Rank is the table's lock's place in the agent's lock order.
	Rank lockorder.Rank
}

// Table is the membership and the load vector.
type Table struct {
	mu        lockorder.Mutex
	self      string
	capacity  float64
	tau       time.Duration
	known     map[string]*Member
	dis       *load.Disseminator
	rng       *rand.Rand
	placement string
	// preemptAfter is the policy's sched.Policy.PreemptAfter.
	preemptAfter time.Duration
	rr           int // round-robin placement's next node
	selfLoad     float64
	selfMem      float64
	jobMem       float64 // Config.JobMemMB
	selfHeld     float64 // the memory requests held here, as last probed
	lastProbe    time.Time
	// waiting: this node's queue waits for room, told since (when) to
	// every peer; answer: the peers whose queues began to wait, to send
	// this node's entry to; heldNews and roomNewsAt are load.RoomNews's
	// state (room.go).
	waiting, told bool
	toldAt        time.Time
	answer        []string
	heldNews      float64
	roomNewsAt    time.Time
}

// loadTauIntervals is the time constant of the smoothed CPU load, in load
// intervals: one hides a single sample's noise (four samples an interval)
// yet shows a migration within a second or two, which the balancing
// policies need to see their own moves.
const loadTauIntervals = 1

// ForNode is an empty members table for node, with its load vector as lc
// sets it (lc is valid: the config was checked), the placement and
// quantum of its scheduling policy pol, and its lock's rank.
func ForNode(node string, lc config.LoadConfig, capacity, jobMemMB float64, pol sched.Policy, rank lockorder.Rank) *Table {
	lp, _ := load.ParsePolicy(lc.Policy)
	t := New(Config{
		Self: node, Capacity: capacity, Tau: loadTauIntervals * lc.Interval,
		Vector: load.NewDisseminator(node, lc.VectorSize, lp, lc.Interval),
		Rng:    rand.New(rand.NewSource(time.Now().UnixNano())), Placement: pol.Placement, JobMemMB: jobMemMB, Rank: rank,
	})
	t.preemptAfter = time.Duration(pol.PreemptAfter)
	return t
}

// New builds a table that knows of no member yet, not even this node
// (Join).
func New(c Config) *Table {
	t := &Table{self: c.Self, capacity: c.Capacity, tau: c.Tau, known: map[string]*Member{}, dis: c.Vector, rng: c.Rng, placement: c.Placement,
		jobMem: c.JobMemMB}
	t.mu.Init(c.Rank, "members.mu")
	return t
}

// Join enters this node itself, alive since now, with its free memory.
func (t *Table) Join(self Member, memFreeMB float64, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	self.Alive, self.Since = true, now
	t.known[t.self] = &self
	t.selfMem, t.lastProbe = memFreeMB, now
}

// Change is what Up changed of a member, for the agent's log.
type Change struct {
	New      bool // first heard of
	Draining bool // its draining flag changed
}

// Up takes memberlist's news of a live member: its gossip address and
// its metadata, which comes from the network (ParseMeta).
func (t *Table) Up(name, addr string, ip net.IP, metadata []byte, now time.Time) Change {
	if name == t.self {
		return Change{}
	}
	m := ParseMeta(metadata)
	t.mu.Lock()
	defer t.mu.Unlock()
	var ch Change
	p := t.known[name]
	if p == nil {
		p = &Member{}
		t.known[name] = p
		ch.New = true
	}
	if !p.Alive {
		p.Since = now
	}
	p.Alive = true
	p.Addr = addr
	p.PeerAddr = net.JoinHostPort(ip.String(), strconv.Itoa(m.PeerPort))
	p.Capacity = m.Capacity
	ch.Draining = p.Draining != m.Draining
	p.Draining = m.Draining
	if len(m.Version) <= maxVersion {
		p.Version = m.Version
	}
	p.UserNS = m.UserNS
	p.LazyUserNS = m.LazyUserNS
	p.Host = m.Host()
	p.FenceKill = m.FenceKill()
	p.Slurm = ""
	if slurm.ValidNode(m.Slurm) == nil {
		p.Slurm = m.Slurm
	}
	return ch
}

// Down takes memberlist's news that a member left or died: it stays
// listed, dead since now, and leaves the load vector.
func (t *Table) Down(name string, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.known[name]; p != nil && name != t.self {
		p.Alive = false
		p.Since = now
	}
	t.dis.Forget(name)
}

// Get is a copy of what the table knows of node.
func (t *Table) Get(node string) (Member, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if p := t.known[node]; p != nil {
		return *p, true
	}
	return Member{}, false
}

// FenceKill is node's fence.kill as it said it (0: unknown).
func (t *Table) FenceKill(node string) time.Duration {
	p, _ := t.Get(node)
	return p.FenceKill
}

// PeerAddr is node's peer address, or an error naming the node (the
// peer client's Addr).
func (t *Table) PeerAddr(node string) (string, error) {
	if p, ok := t.Get(node); ok && p.PeerAddr != "" {
		return p.PeerAddr, nil
	}
	return "", peer.Unavailable(node)
}

// Alive says whether node is a live member.
func (t *Table) Alive(node string) bool {
	p, ok := t.Get(node)
	return ok && p.Alive
}

// Reachable is false for a node membership has declared dead only (one
// it never heard of may still answer).
func (t *Table) Reachable(node string) bool {
	p, ok := t.Get(node)
	return !ok || p.Alive
}

// Live lists the live members, this node and draining ones included, in
// node order.
func (t *Table) Live() []string {
	t.mu.Lock()
	var out []string
	for id, p := range t.known {
		if p.Alive {
			out = append(out, id)
		}
	}
	t.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return sched.IDLess(out[i], out[j]) })
	return out
}

// All is a copy of every member the table knows, dead ones too.
func (t *Table) All() map[string]Member {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make(map[string]Member, len(t.known))
	for id, p := range t.known {
		out[id] = *p
	}
	return out
}

// IPs is the set of the members' peer addresses' hosts.
func (t *Table) IPs() map[string]bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]bool{}
	for _, p := range t.known {
		if h, _, err := net.SplitHostPort(p.PeerAddr); err == nil {
			out[h] = true
		}
	}
	return out
}

// HasIP says whether ip is the host of a member's peer address (the
// peer port's caps give it a place of its own).
func (t *Table) HasIP(ip string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, p := range t.known {
		if h, _, err := net.SplitHostPort(p.PeerAddr); err == nil && h == ip {
			return true
		}
	}
	return false
}

// Self is this node's smoothed load and its free memory, as last probed.
func (t *Table) Self() (loadPerCore, memFreeMB float64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.selfLoad, t.selfMem
}

// SetPlacement is the placement a new policy names, and its quantum of
// the queue's second level (sched.Policy.PreemptAfter).
func (t *Table) SetPlacement(p string, preemptAfter time.Duration) {
	t.mu.Lock()
	t.placement, t.preemptAfter = p, preemptAfter
	t.mu.Unlock()
}

// PreemptAfter is the running policy's quantum of the queue's second
// level (0: none).
func (t *Table) PreemptAfter() time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.preemptAfter
}

// Probe is the load part of one timer tick: the node's runnable threads,
// free memory and job count, measured now, the memory requests of its
// jobs (heldMB), and the load and requests of the moves it admitted and
// awaits (pending: sched.Ledger.Reserved). It smooths the load, and
// returns the members to send this node's entry to and the message,
// encoded.
func (t *Table) Probe(now time.Time, runnable int, memFreeMB float64, jobs int, heldMB float64, pending sched.Node) ([]string, []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	// A tick that waited while a kicked one ran is older than it.
	dt := max(now.Sub(t.lastProbe), 0)
	if now.After(t.lastProbe) {
		t.lastProbe = now
	}
	raw := float64(runnable) / t.capacity
	// A job that ended or left is news for the busier nodes now, and the
	// load is sent as measured: that fall is not noise to smooth.
	news := t.dis.News(now, jobs, raw, t.selfLoad, t.capacity)
	if len(news) > 0 {
		t.selfLoad = raw
	} else {
		t.selfLoad = load.Smooth(t.selfLoad, raw, dt, t.tau)
	}
	t.selfMem = memFreeMB
	t.selfHeld = heldMB + pending.MemHeldMB
	var live []string
	for id, p := range t.known {
		if p.Alive {
			live = append(live, id)
		}
	}
	targets := t.dis.Tick(now, live, t.rng)
	for _, id := range append(news, t.roomTargets(now, live)...) {
		if !slices.Contains(targets, id) {
			targets = append(targets, id)
		}
	}
	// Sent in a random order: homes whose queues wait race for the room
	// an entry shows, and the first sent to would win every time.
	t.rng.Shuffle(len(targets), func(i, j int) { targets[i], targets[j] = targets[j], targets[i] })
	e := load.Entry{Node: t.self, Capacity: t.capacity, Load: t.selfLoad + pending.Load, MemFreeMB: t.selfMem, Least: pending.Least,
		MemJobsMB: min(t.jobMem, load.MaxMemMB), MemHeldMB: min(t.selfHeld, load.MaxMemMB), Waiting: t.waiting}
	if p := t.known[t.self]; p != nil {
		e.Addr = p.PeerAddr
	}
	return targets, load.EncodeMessage(e)
}

// Received is what Receive made of a peer's load entry.
type Received struct {
	Kept bool // the vector took it
	// Live: it is a live member's; Eased: its load fell enough that it
	// may take work now (load.Disseminator.Eased).
	Live, Eased bool
	SelfLoad    float64
}

// Receive takes a peer's load entry, decoded but untrusted.
func (t *Table) Receive(now time.Time, e load.Entry) Received {
	t.mu.Lock()
	defer t.mu.Unlock()
	prev, had := t.dis.Vector.Get(e.Node)
	r := Received{Kept: t.dis.Receive(now, e, t.selfLoad), SelfLoad: t.selfLoad}
	// Only for a live member: the snapshot has no other.
	p := t.known[e.Node]
	r.Live = r.Kept && p != nil && p.Alive
	r.Eased = r.Live && t.dis.Eased(now, prev, had, e, t.selfLoad)
	t.newlyWaiting(r.Live, prev, had, e)
	return r
}

// Peers is the live peers as the scheduler sees them (sched.Peers: from
// the load vector; a member not in it yet is left out), in node order.
func (t *Table) Peers() []sched.Node {
	t.mu.Lock()
	defer t.mu.Unlock()
	return sched.Peers(t.self, t.dis.Vector, t.peerInfo)
}

// peerInfo is membership's view of node id; t.mu is held.
func (t *Table) peerInfo(id string) sched.PeerInfo {
	p := t.known[id]
	if p == nil {
		return sched.PeerInfo{}
	}
	return sched.PeerInfo{Alive: p.Alive, Draining: p.Draining, CPU: p.Host.CPU}
}

// Decide runs a scheduling policy's decision on snap with the table's
// random source.
func (t *Table) Decide(pol *sched.Scheduler, snap sched.Snapshot) []sched.Move {
	t.mu.Lock()
	defer t.mu.Unlock()
	return pol.Decide(snap, t.rng)
}

// Place picks a node for each of count new processes of request req: on
// when it is set (a live member that is not draining, with room for
// their memory), else the policy's placement (least load per capacity
// from the load vector, random-two, or round-robin) among the nodes with
// room for it (sched.Place). selfHeldMB is what the memory requests
// held here add up to now. It returns the nodes and why they were
// chosen; a run that fits nowhere is refused (sched.FitsNowhere: its
// error says whether it never will). image is what the CPU the processes'
// program started on offers, for a restart from a checkpoint: only a node
// whose CPU has as much is chosen (sched.RunsImage); a first start passes
// the zero Set, and goes anywhere. within, when not nil, are the only
// nodes it may choose, each with the CPUs it has of them (a Slurm
// allocation's: sched.Within).
func (t *Table) Place(on string, count int, selfDraining bool, req resources.Request, selfHeldMB float64, image cpufeat.Set, within map[string]int) ([]string, string, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if on != "" {
		p := t.known[on]
		switch {
		case p == nil:
			return nil, "", errkind.New(peer.ErrBadRequest, "--on: no node %q in the cluster", on)
		case within != nil && !hasKey(within, on):
			return nil, "", errkind.New(peer.ErrBadRequest, "--on: node %s is not one of the Slurm job's (%s)", on, slurm.Field)
		case !p.Alive:
			return nil, "", errkind.New(peer.ErrUnavailable, "--on: node %s is not alive", on)
		case p.Draining || (on == t.self && selfDraining):
			return nil, "", errkind.New(peer.ErrUnavailable, "--on: node %s is draining (roam node resume ends it)", on)
		}
		nl := t.nodeLoad(on, p, selfDraining, selfHeldMB)
		if _, err := sched.RunsImage([]sched.NodeLoad{nl}, image); err != nil {
			return nil, "", errkind.New(errors.Join(peer.ErrUnavailable, err), "--on %s: %v", on, err)
		}
		for k := range count {
			if err := sched.MemFits(on, nl.MemJobsMB, nl.MemHeldMB+float64(k)*req.MemMB(), req); err != nil {
				return nil, "", errkind.New(errors.Join(peer.ErrUnavailable, err), "--on %s: room for %d of the %d processes: %v", on, k, count, err)
			}
		}
		return slices.Repeat([]string{on}, count), "roam run --on " + on, nil
	}
	var nodes []sched.NodeLoad
	for id, p := range t.known {
		if p.Alive {
			nodes = append(nodes, t.nodeLoad(id, p, selfDraining, selfHeldMB))
		}
	}
	nodes, err := sched.RunsImage(sched.Within(nodes, within), image)
	if err != nil {
		return nil, "", errkind.New(errors.Join(peer.ErrUnavailable, err), "%v", err)
	}
	out, rr, err := sched.Place(t.placement, nodes, count, req, t.rng, t.rr)
	t.rr = rr
	// Never room is a bad request; none now, the cluster's state: both
	// still match sched's kinds, for a caller that queues.
	switch {
	case errors.Is(err, sched.ErrTooLarge):
		err = errkind.New(errors.Join(peer.ErrBadRequest, err), "%v", err)
	case errors.Is(err, sched.ErrNoRoom):
		err = errkind.New(errors.Join(peer.ErrUnavailable, err), "%v", err)
	}
	return out, "placement " + t.placement, err
}

func hasKey(m map[string]int, k string) bool { _, ok := m[k]; return ok }

// nodeLoad is what placement knows of live member id (mu held): this
// node's own as probed, with selfHeldMB, or sched.NodeLoadOf its load
// vector's entry.
func (t *Table) nodeLoad(id string, p *Member, selfDraining bool, selfHeldMB float64) sched.NodeLoad {
	if id == t.self {
		return sched.NodeLoad{ID: id, Capacity: p.Capacity, Draining: selfDraining, CPU: p.Host.CPU, Load: t.selfLoad, MemJobsMB: t.jobMem, MemHeldMB: selfHeldMB, Self: true}
	}
	e, ok := t.dis.Vector.Get(id)
	return sched.NodeLoadOf(id, p.Capacity, sched.PeerInfo{Alive: p.Alive, Draining: p.Draining, CPU: p.Host.CPU}, e, ok)
}

// Heard is node's entry in the load vector, if it holds one.
func (t *Table) Heard(node string) (load.Entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dis.Vector.Get(node)
}

// VectorLen is how many entries the load vector holds.
func (t *Table) VectorLen() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.dis.Vector.Len()
}

// Known says whether membership has heard of node, alive or not.
func (t *Table) Known(node string) bool {
	_, ok := t.Get(node)
	return ok
}
