// Package queue is the pure rule of a home's queue: which of the jobs
// pending at a home start now, on which nodes, and why the others wait.
// A job is pending when its sweep's --max-running holds it back, or when
// no node has room for its memory request (roam run --mem) now; the home
// records it, and calls Decide when room may have come (one of its jobs
// ended, a load entry shows room, its release loop's tick) and starts
// what Decide returns. It does no I/O, reads no clock and keeps no state:
// the home passes in its pending jobs, its users' running jobs, the nodes
// as it sees them, and a random source.
//
// The order between users is max-min fair on running jobs: each start
// goes to the user with the fewest jobs starting or running from this
// home (counting those started in this round), ties to the user whose
// oldest pending run is oldest; within a user, the oldest run first, and
// a sweep's lowest index first. A user's first job therefore starts
// before the next job of a user who has thousands running or pending,
// and users with many jobs each share the room equally, whatever the
// size of their sweeps. The count of jobs is what the home knows exactly
// and what roam ps shows; a user's CPU time is the scheduler's to
// share (its turns serve the job with the least attained service first).
//
// Room is what the home sees: its own node as it is now, and every other
// node's load entry with the home's own starts sent since that entry
// added (Input.Placed), so that a round never sends a node more than the
// room its last entry showed, and a node that refused one of its starts
// since that entry takes none (Input.Refused). The node that takes a job judges it again
// against what it holds then (launch's refuse): it is the arbiter when
// several homes release into the same room, and a job it refuses is
// pending again, not failed. No home learns of a remote node's room
// before the others (each reads the same load entries), and a round
// starts at most Input.Max jobs, so that one home's big sweep cannot take
// every place freed at once. A run whose request is too large for any
// node now (sched.ErrTooLarge) waits as well: a node may come back; a
// request larger than any node's memory at submission is refused there.
//
// A run that waits for room while others' smaller requests fit is passed
// over (backfill), but the first of them in the fair order holds a node
// back: the node with the most room for it takes no other start of this
// home until the waiting job fits there, so that a stream of small jobs
// cannot starve a large one.
package queue

import (
	"errors"
	"math/rand"
	"slices"
	"sort"
	"strconv"
	"time"

	"roam/internal/cpufeat"
	"roam/internal/resources"
	"roam/internal/sched"
)

// RoundMax bounds the jobs one round of a home starts: a round's start
// requests take about a millisecond or two a job (roam bench job-start),
// so a round holds its home's release for well under a second, and room
// freed at once is left for the next round and for the other homes that
// saw it. A round that reaches it is followed by another at once.
const RoundMax = 128

// Group is the jobs pending at a home that start alike: a sweep's, or a
// lone job's.
type Group struct {
	// Key is the sweep's id, or the lone job's id.
	Key string
	UID uint32
	// Seq orders the runs of one user: the sweep's or job's number in its
	// home's job sequence (the older run first).
	Seq uint64
	// On is the node its jobs were asked to run on (roam run --on), ""
	// for any.
	On string
	// Within are the nodes its jobs may run on, those of the Slurm
	// allocation its run serves (job.Spec.Within); nil: any. Slurm is
	// that allocation's Slurm job ("": none).
	Within []string
	Slurm  string
	// MaxRunning bounds its jobs starting or running at once (roam run
	// --max-running; 0: no bound), and Running counts them.
	MaxRunning, Running int
	// Pending are its pending jobs, in any order.
	Pending []Job
}

// Job is one pending job: its index in its sweep (0 for a lone job), its
// id and its resource request (roam run --cpus, --mem: a sweep's jobs
// may each ask their own memory, and its lowest index waits for its room
// first). Preempted: it ran, had its quantum and was checkpointed to let
// the fresh jobs of its group in (Preempt); it starts again from its
// checkpoint, after every fresh job of its group, and only on a node
// whose CPU has every feature of CPU, the one its program started on
// (sched.RunsImage; zero, as for a fresh job: anywhere).
type Job struct {
	Index     int
	ID        string
	Req       resources.Request
	Preempted bool
	CPU       cpufeat.Set
}

// Placed is a job of this home started on a node (not the home itself)
// and not ended: the node's load entry counts its request only when it
// was sent after the start.
type Placed struct {
	Node    string
	MemMB   float64
	Slots   int
	Started time.Time
}

// Input is what Decide reads.
type Input struct {
	Groups []Group
	// Running is each user's jobs starting or running from this home.
	Running map[uint32]int
	// Nodes are the live members as the home sees them: its own (Self)
	// as it is now, the others from their load entries; one that has
	// sent none yet takes no start (its room is not known).
	Self  string
	Nodes []sched.NodeLoad
	// Heard is when each node's load entry was received (the home's own
	// is not in it: it is current).
	Heard map[string]time.Time
	// Placed are the home's jobs on other nodes, to count those its load
	// entries do not.
	Placed []Placed
	// Refused is when each node last refused a start of this home (for
	// want of room, most often): it takes none until an entry of it
	// received after that; the home's own node, current, is not kept
	// out.
	Refused map[string]time.Time
	// Placement is the policy's placement (sched.Place), and RR the
	// round-robin cursor the home keeps.
	Placement string
	RR        int
	// Max bounds the starts of the round (RoundMax).
	Max int
}

// EntrySlack is how long before a node's load entry was received a start
// sent there may still be missing from it: the entry was on its way, or
// the node had not yet reserved the job's room, when the start was
// recorded. A start within it is counted beside the entry (a round then
// sees a little less room for a moment, never more than there is).
// Milliseconds on a LAN; a tenth of a second covers a busy node's.
const EntrySlack = 100 * time.Millisecond

// Start is one pending job to start, and where.
type Start struct {
	ID, Node string
	// Key is its group's; Index its index.
	Key   string
	Index int
	// Restore: the job was preempted, and starts again from its
	// checkpoint (a restart), not from its command.
	Restore bool
}

// Decision is what a round starts, and why the rest wait.
type Decision struct {
	Starts []Start
	// Why says, by group key, why the group's jobs not started wait;
	// roam ps shows it.
	Why map[string]string
	// RR is the round-robin cursor after the round.
	RR int
	// ForRoom: some group waits for memory on some node: a load entry
	// showing room is news for this home.
	ForRoom bool
	// Full: the round stopped at Max with jobs that could have started:
	// another round is due at once.
	Full bool
	// Short is, by group key, how many of its fresh jobs (never run)
	// the round left waiting for room, none of the live nodes having it
	// (sched.ErrNoRoom): the room a preemption of its own group frees
	// would let them in (Preempt).
	Short map[string]int
	// NeedMB is, by group key in Short, the memory request of the job
	// that waits first (its lowest index): the room a preemption must
	// free for it (PreemptInput.NeedMB).
	NeedMB map[string]float64
	// RoomMB is, by node that takes starts, the room for memory
	// requests the round left (PreemptInput.RoomMB).
	RoomMB map[string]float64
}

// group is a Group in a round: its pending jobs sorted, how many of them
// may start, and whether it waits for room.
type group struct {
	Group       // a copy: its Pending sorted
	next    int // the next of Pending to start
	may     int // how many more may start (--max-running)
	blocked bool
}

// Decide is one round of the home's queue.
func Decide(in Input, rng *rand.Rand) Decision {
	d := Decision{Why: map[string]string{}, RR: in.RR, Short: map[string]int{}, NeedMB: map[string]float64{}}
	left := map[string]string{} // why a node takes no start this round
	nodes := seen(in, left)
	users := byUser(in.Groups, d.Why)
	running := map[uint32]int{}
	for u, n := range in.Running {
		running[u] = n
	}
	reserved := ""
	for {
		g := pick(users, running)
		if g == nil {
			break
		}
		if len(d.Starts) >= in.Max {
			d.Full = true
			for _, gs := range users {
				for _, x := range gs {
					if x.active() {
						d.Why[x.Key] = "its turn comes at the next round: a round starts at most " + strconv.Itoa(in.Max) + " jobs"
					}
				}
			}
			break
		}
		// A preempted job is restored only where its CPU fits: while no
		// such node is alive, its group waits, saying so.
		fit, err := sched.RunsImage(within(nodes, g.Within), g.Pending[g.next].CPU)
		if err != nil {
			g.blocked, d.Why[g.Key] = true, "its checkpoint waits for a node whose CPU can run it: "+err.Error()
			continue
		}
		node, why, err := place(g, fit, left, in.Placement, &d.RR, rng)
		if err != nil {
			g.blocked = true
			d.Why[g.Key] = why
			if errors.Is(err, sched.ErrNoRoom) {
				d.ForRoom = true
				if n := g.fresh(); n > 0 {
					d.Short[g.Key], d.NeedMB[g.Key] = n, g.Pending[g.next].Req.MemMB()
				}
				if reserved == "" {
					reserved = reserve(nodes, left, g)
				}
			}
			continue
		}
		j := g.Pending[g.next]
		g.next++
		g.may--
		running[g.UID]++
		take(nodes, node, j.Req)
		d.Starts = append(d.Starts, Start{ID: j.ID, Node: node, Key: g.Key, Index: j.Index, Restore: j.Preempted})
		if g.next < len(g.Pending) && g.may == 0 {
			d.Why[g.Key] = maxRunning(g.MaxRunning)
		}
	}
	d.RoomMB = room(nodes, reserved)
	return d
}

// room is the room for memory requests of each node that takes starts:
// the node reserved for a waiting request included, which it holds its
// room for.
func room(nodes []sched.NodeLoad, reserved string) map[string]float64 {
	out := map[string]float64{}
	for _, x := range nodes {
		if !x.Draining || x.ID == reserved {
			out[x.ID] = max(x.MemJobsMB-x.MemHeldMB, 0)
		}
	}
	return out
}

// active says whether g has a job that may start and was not found
// without room this round.
func (g *group) active() bool { return !g.blocked && g.may > 0 && g.next < len(g.Pending) }

// fresh is how many of g's jobs not yet started this round have never
// run and may start (--max-running): the fresh come first in Pending.
func (g *group) fresh() int {
	n := 0
	for _, j := range g.Pending[g.next:] {
		if j.Preempted {
			break
		}
		n++
	}
	return min(n, g.may)
}

// byUser sorts the groups into their users', each user's oldest first,
// and each group's jobs by index, its fresh jobs before its preempted
// ones (a two-level feedback queue: a job that had its quantum waits
// behind every job that has had none); a group its --max-running holds
// back entirely is given its reason.
func byUser(gs []Group, why map[string]string) map[uint32][]*group {
	out := map[uint32][]*group{}
	for i := range gs {
		g := &group{Group: gs[i], may: len(gs[i].Pending)}
		if g.MaxRunning > 0 {
			g.may = min(g.may, g.MaxRunning-g.Running)
		}
		if len(g.Pending) == 0 {
			continue
		}
		if g.may <= 0 {
			why[g.Key] = maxRunning(g.MaxRunning)
			continue
		}
		g.Pending = append([]Job(nil), g.Pending...)
		sort.Slice(g.Pending, func(a, b int) bool {
			x, y := g.Pending[a], g.Pending[b]
			if x.Preempted != y.Preempted {
				return !x.Preempted
			}
			return x.Index < y.Index
		})
		out[g.UID] = append(out[g.UID], g)
	}
	for _, us := range out {
		sort.Slice(us, func(a, b int) bool {
			if us[a].Seq != us[b].Seq {
				return us[a].Seq < us[b].Seq
			}
			return us[a].Key < us[b].Key
		})
	}
	return out
}

// pick is the group whose job starts next: the first active group of the
// user with the fewest jobs running, ties to the user whose first active
// group is oldest, then to the lower uid; nil when no group is active.
func pick(users map[uint32][]*group, running map[uint32]int) *group {
	var best *group
	for u, gs := range users {
		var first *group
		for _, g := range gs {
			if g.active() {
				first = g
				break
			}
		}
		if first == nil {
			continue
		}
		if best == nil {
			best = first
			continue
		}
		ru, rb := running[u], running[best.UID]
		if ru < rb || ru == rb && (first.Seq < best.Seq || first.Seq == best.Seq && u < best.UID) {
			best = first
		}
	}
	return best
}

// place picks the node for g's next job, or says why there is none.
func place(g *group, nodes []sched.NodeLoad, left map[string]string, placement string, rr *int, rng *rand.Rand) (string, string, error) {
	if g.On != "" {
		return placeOn(g, nodes, left)
	}
	req := g.Pending[g.next].Req
	out, next, err := sched.Place(placement, nodes, 1, req, rng, *rr)
	if err != nil {
		return "", reason(req, err), err
	}
	*rr = next
	return out[0], "", nil
}

// placeOn is place for a group asked to run on one node.
func placeOn(g *group, nodes []sched.NodeLoad, left map[string]string) (string, string, error) {
	for _, x := range nodes {
		if x.ID != g.On {
			continue
		}
		if why := left[x.ID]; why != "" {
			return "", "--on " + g.On + ": the node " + why, sched.ErrNoRoom
		}
		req := g.Pending[g.next].Req
		if err := sched.MemFits(x.ID, x.MemJobsMB, x.MemHeldMB, req); err != nil {
			return "", "--on " + g.On + ": " + reason(req, err), err
		}
		return x.ID, "", nil
	}
	return "", "--on " + g.On + ": the node is not alive", sched.ErrNoNode
}

// reason is why a job of request req waits, placement having failed
// with err.
func reason(req resources.Request, err error) string {
	mem := "--mem " + resources.FormatMem(req.MemBytes)
	switch {
	case errors.Is(err, sched.ErrTooLarge):
		return mem + " is more than any live node gives its jobs"
	case errors.Is(err, sched.ErrNoRoom):
		return "no node has room for " + mem + " now"
	}
	return "no live node to start on"
}

// maxRunning is why a sweep's jobs wait past its --max-running.
func maxRunning(k int) string { return "--max-running " + strconv.Itoa(k) + " reached" }

// seen is the nodes as a round uses them: a copy in id order, with each
// job of this home started on another node after that node's entry was
// received (less EntrySlack) counted there. A node that is draining, has sent no entry
// yet, or refused a start of this home since its entry takes none
// (placement leaves a draining node out, which is what it is made), and
// left says why.
func seen(in Input, left map[string]string) []sched.NodeLoad {
	out := append([]sched.NodeLoad(nil), in.Nodes...)
	sort.Slice(out, func(i, j int) bool { return sched.IDLess(out[i].ID, out[j].ID) })
	at := map[string]int{}
	for i, x := range out {
		at[x.ID] = i
		r, refused := in.Refused[x.ID]
		switch h, heard := in.Heard[x.ID]; {
		case x.Draining:
			left[x.ID] = "is draining"
		case !heard && x.ID != in.Self:
			out[i].Draining, left[x.ID] = true, "has sent no load entry yet"
		case refused && r.After(h) && x.ID != in.Self:
			// The home's own node is as it is now: a refusal of its
			// own says nothing this round does not see, and no entry of
			// its own comes to lift it.
			out[i].Draining, left[x.ID] = true, "refused a start since its last load entry"
		}
	}
	for _, p := range in.Placed {
		i, ok := at[p.Node]
		h, heard := in.Heard[p.Node]
		if !ok || !heard || !p.Started.After(h.Add(-EntrySlack)) {
			continue
		}
		out[i].MemHeldMB += p.MemMB
		if out[i].Capacity > 0 {
			out[i].Load += float64(p.Slots) / out[i].Capacity
		}
	}
	return out
}

// within are the nodes of ids (nil: all of them): a group that serves
// a Slurm allocation starts only on its nodes.
func within(nodes []sched.NodeLoad, ids []string) []sched.NodeLoad {
	if ids == nil {
		return nodes
	}
	out := make([]sched.NodeLoad, 0, len(ids))
	for _, x := range nodes {
		if slices.Contains(ids, x.ID) {
			out = append(out, x)
		}
	}
	return out
}

// take counts a job of req started on node.
func take(nodes []sched.NodeLoad, node string, req resources.Request) {
	for i := range nodes {
		if nodes[i].ID == node {
			nodes[i].MemHeldMB += req.MemMB()
			if nodes[i].Capacity > 0 {
				nodes[i].Load += float64(req.Slots()) / nodes[i].Capacity
			}
			return
		}
	}
}

// reserve holds back, for the rest of the round, the node with the most
// room for g's next job among those large enough for it, and names it
// ("": none).
func reserve(nodes []sched.NodeLoad, left map[string]string, g *group) string {
	best, mb := -1, g.Pending[g.next].Req.MemMB()
	for i, x := range nodes {
		if x.Draining || x.MemJobsMB+1e-9 < mb || g.On != "" && x.ID != g.On {
			continue
		}
		if best < 0 || x.MemJobsMB-x.MemHeldMB > nodes[best].MemJobsMB-nodes[best].MemHeldMB {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	nodes[best].Draining, left[nodes[best].ID] = true, "is held for a larger request"
	return nodes[best].ID
}
