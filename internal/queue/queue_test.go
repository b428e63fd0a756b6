package queue

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"roam/internal/resources"
	"roam/internal/sched"
)

const mb = 1 << 20

// known is when the nodes' load entries were received, long ago: every
// node of these tests has sent one.
var known = map[string]time.Time{"1": {}, "2": {}, "3": {}, "4": {}, "5": {}, "6": {}, "7": {}, "8": {}, "9": {}}

// nodes4 are four nodes of 768 MiB for jobs, each holding held MiB.
func nodes4(held ...float64) []sched.NodeLoad {
	var out []sched.NodeLoad
	for i, h := range held {
		out = append(out, sched.NodeLoad{ID: fmt.Sprint(i + 1), Capacity: 1, MemJobsMB: 768, MemHeldMB: h})
	}
	return out
}

// sweepOf is a sweep of n pending jobs of uid, its key "h:seq".
func sweepOf(uid uint32, seq uint64, n int, mem int64) Group {
	g := Group{Key: fmt.Sprintf("h:%d", seq), UID: uid, Seq: seq}
	for i := range n {
		g.Pending = append(g.Pending, Job{Index: i, ID: fmt.Sprintf("h.%d", seq+1+uint64(i)), Req: resources.Request{MilliCPUs: 1000, MemBytes: mem}})
	}
	return g
}

func byNode(d Decision) map[string]int {
	m := map[string]int{}
	for _, s := range d.Starts {
		m[s.Node]++
	}
	return m
}

// Room: a round starts only what the nodes have room for, each node no
// more than its memory admits, the lowest indices first, and says why
// the rest wait.
func TestDecideStartsWhatFits(t *testing.T) {
	g := sweepOf(1001, 10, 120, 160*mb)
	d := Decide(Input{Heard: known, Groups: []Group{g}, Nodes: nodes4(0, 320, 640, 700), Max: RoundMax}, rand.New(rand.NewSource(1)))
	// 4 + 2 + 0 + 0 places of 160 MiB.
	if got := byNode(d); got["1"] != 4 || got["2"] != 2 || len(got) != 2 {
		t.Fatalf("starts by node %v", got)
	}
	for i, s := range d.Starts {
		if s.Index != i || s.Key != g.Key {
			t.Fatalf("start %d is %+v: the lowest indices go first", i, s)
		}
	}
	if why := d.Why[g.Key]; why != "no node has room for --mem 160M now" || !d.ForRoom {
		t.Fatalf("why %q, for room %v", why, d.ForRoom)
	}
	if d.Full {
		t.Fatal("a round that started all it could says it is full")
	}
}

// Fairness: a user with thousands pending and many running does not hold
// up another user's first job: B's starts first, and the room left goes
// to A. Between two users with many pending, the room is shared equally.
func TestDecideFairBetweenUsers(t *testing.T) {
	a := sweepOf(1001, 10, 10000, 160*mb)
	a.Running = 12
	b := sweepOf(1002, 20000, 3, 160*mb)
	in := Input{Heard: known, Groups: []Group{a, b}, Running: map[uint32]int{1001: 12}, Nodes: nodes4(640, 640, 640, 480), Max: RoundMax}
	d := Decide(in, rand.New(rand.NewSource(1)))
	if len(d.Starts) != 1 || d.Starts[0].Key != b.Key {
		t.Fatalf("one place free; started %v, want B's first job", d.Starts)
	}
	// Both with nothing running: they take turns, the older run first.
	in = Input{Heard: known, Groups: []Group{a, b}, Nodes: nodes4(0, 0, 0, 0), Max: RoundMax}
	a.Running = 0
	in.Groups[0] = a
	d = Decide(in, rand.New(rand.NewSource(1)))
	var keys []string
	for _, s := range d.Starts {
		keys = append(keys, s.Key)
	}
	want := []string{a.Key, b.Key, a.Key, b.Key, a.Key, b.Key}
	if len(keys) < 6 || !slices.Equal(keys[:6], want) {
		t.Fatalf("order %v, want turns %v", keys, want)
	}
	// B has 3: A takes the rest of the 16 places.
	if got := strings.Count(strings.Join(keys, " "), a.Key); got != 13 || len(keys) != 16 {
		t.Fatalf("A got %d of %d starts", got, len(keys))
	}
	// The input is not changed: its pending jobs keep their order.
	if in.Groups[1].Pending[0].Index != 0 || len(in.Groups[0].Pending) != 10000 {
		t.Fatal("input changed")
	}
}

// Bounds: --max-running holds a sweep back whatever the room, a round
// starts at most Max jobs and says so, and a node's room already taken
// by this home's starts since its load entry counts.
func TestDecideBounds(t *testing.T) {
	g := sweepOf(1001, 10, 50, 0)
	g.MaxRunning, g.Running = 4, 1
	d := Decide(Input{Heard: known, Groups: []Group{g}, Nodes: nodes4(0, 0, 0, 0), Max: RoundMax}, rand.New(rand.NewSource(1)))
	if len(d.Starts) != 3 || d.Why[g.Key] != "--max-running 4 reached" {
		t.Fatalf("started %d, why %q", len(d.Starts), d.Why[g.Key])
	}
	g.Running = 4
	d = Decide(Input{Heard: known, Groups: []Group{g}, Nodes: nodes4(0, 0, 0, 0), Max: RoundMax}, rand.New(rand.NewSource(1)))
	if len(d.Starts) != 0 || d.Why[g.Key] != "--max-running 4 reached" {
		t.Fatalf("started %d, why %q", len(d.Starts), d.Why[g.Key])
	}

	big := sweepOf(1001, 10, 1000, 0)
	d = Decide(Input{Heard: known, Groups: []Group{big}, Nodes: nodes4(0, 0, 0, 0), Max: 7}, rand.New(rand.NewSource(1)))
	if len(d.Starts) != 7 || !d.Full || !strings.Contains(d.Why[big.Key], "at most 7") {
		t.Fatalf("started %d, full %v, why %q", len(d.Starts), d.Full, d.Why[big.Key])
	}

	// Node 2's entry was heard at t; two jobs started there since, one
	// at t (the entry may have been on its way), one a second before:
	// the first three count beside what the entry says.
	at := time.Unix(1000, 0)
	placed := []Placed{
		{Node: "2", MemMB: 160, Slots: 1, Started: at.Add(time.Second)},
		{Node: "2", MemMB: 160, Slots: 1, Started: at.Add(2 * time.Second)},
		{Node: "2", MemMB: 160, Slots: 1, Started: at},
		{Node: "2", MemMB: 160, Slots: 1, Started: at.Add(-time.Second)},
		{Node: "1", MemMB: 160, Slots: 1, Started: at.Add(time.Second)}, // the home: current
	}
	g = sweepOf(1001, 10, 100, 160*mb)
	d = Decide(Input{Self: "1", Groups: []Group{g}, Nodes: nodes4(640, 0, 768, 768), Heard: map[string]time.Time{"2": at, "3": at, "4": at}, Placed: placed, Max: RoundMax},
		rand.New(rand.NewSource(1)))
	if got := byNode(d); got["2"] != 1 || len(got) != 1 {
		t.Fatalf("starts by node %v; node 2 has room for 4, 3 of them taken since its entry", got)
	}
	// A node that refused a start since its entry takes none until the
	// next; one that refused before it, as its entry says.
	in := Input{Self: "1", Groups: []Group{g}, Nodes: nodes4(0, 0), Heard: map[string]time.Time{"2": at}, Max: RoundMax,
		Refused: map[string]time.Time{"2": at.Add(time.Millisecond)}}
	if got := byNode(Decide(in, rand.New(rand.NewSource(1)))); got["2"] != 0 || got["1"] != 4 {
		t.Fatalf("starts by node %v; node 2 refused one since its entry", got)
	}
	in.Refused["2"] = at.Add(-time.Millisecond)
	if got := byNode(Decide(in, rand.New(rand.NewSource(1)))); got["2"] != 4 {
		t.Fatalf("starts by node %v; node 2's entry is newer than its refusal", got)
	}
	// The home refused a start of its own (a race with what came since
	// the round's look): its state is current, it sends itself no entry
	// that would lift the refusal, and the next round sees it as it is.
	// Kept out until an entry of its own, it took no start again (roam
	// bench sweep: static's home ran none of a 600-job sweep).
	in.Refused = map[string]time.Time{"1": at.Add(time.Hour)}
	if got := byNode(Decide(in, rand.New(rand.NewSource(1)))); got["1"] != 4 || got["2"] != 4 {
		t.Fatalf("starts by node %v; the home's refusal kept it out", got)
	}
	g.On = "2"
	in = Input{Groups: []Group{g}, Nodes: nodes4(0, 0), Max: RoundMax, Refused: map[string]time.Time{"2": at}}
	if d := Decide(in, rand.New(rand.NewSource(1))); len(d.Starts) != 0 || d.Why[g.Key] != "--on 2: the node has sent no load entry yet" {
		t.Fatalf("--on a node never heard of: %v, why %q", d.Starts, d.Why[g.Key])
	}
	in.Heard = map[string]time.Time{"2": at.Add(-time.Second)}
	if d := Decide(in, rand.New(rand.NewSource(1))); len(d.Starts) != 0 || d.Why[g.Key] != "--on 2: the node refused a start since its last load entry" {
		t.Fatalf("--on a node that refused since its entry: %v, why %q", d.Starts, d.Why[g.Key])
	}
}

// A large request waiting for room holds the node with the most room
// back from smaller ones of this home, which go elsewhere; one no node
// can take waits with its reason; --on waits for its node.
func TestDecideHoldsANodeForALargeRequest(t *testing.T) {
	large := sweepOf(1001, 10, 5, 512*mb)
	small := sweepOf(1002, 20, 50, 64*mb)
	small.Running = 0
	in := Input{Heard: known, Groups: []Group{large, small}, Running: map[uint32]int{1002: 0, 1001: 0}, Nodes: nodes4(600, 400, 700, 700), Max: RoundMax}
	d := Decide(in, rand.New(rand.NewSource(1)))
	if got := byNode(d); got["2"] != 0 || got["1"] != 2 || got["3"] != 1 || got["4"] != 1 {
		t.Fatalf("starts by node %v: node 2, the one with most room, is held for the 512M job", got)
	}
	if d.Why[large.Key] != "no node has room for --mem 512M now" {
		t.Fatalf("why %q", d.Why[large.Key])
	}

	huge := sweepOf(1001, 10, 1, 1024*mb)
	d = Decide(Input{Heard: known, Groups: []Group{huge, small}, Nodes: nodes4(0, 0, 0, 0), Max: RoundMax}, rand.New(rand.NewSource(1)))
	if d.Why[huge.Key] != "--mem 1G is more than any live node gives its jobs" || len(d.Starts) != 48 {
		t.Fatalf("why %q, %d started: a request no node can take holds no node", d.Why[huge.Key], len(d.Starts))
	}

	on := sweepOf(1001, 10, 5, 160*mb)
	on.On = "3"
	d = Decide(Input{Heard: known, Groups: []Group{on}, Nodes: nodes4(0, 0, 480, 0), Max: RoundMax}, rand.New(rand.NewSource(1)))
	if got := byNode(d); got["3"] != 1 || len(got) != 1 || d.Why[on.Key] != "--on 3: no node has room for --mem 160M now" {
		t.Fatalf("--on 3: %v, why %q", got, d.Why[on.Key])
	}
	on.On = "9"
	if d = Decide(Input{Heard: known, Groups: []Group{on}, Nodes: nodes4(0), Max: RoundMax}, rand.New(rand.NewSource(1))); len(d.Starts) != 0 || d.Why[on.Key] != "--on 9: the node is not alive" {
		t.Fatalf("--on 9: %v, why %q", d.Starts, d.Why[on.Key])
	}
}

// A sweep whose jobs each ask their own memory (roam run --mem {2}M)
// starts them lowest index first, each where its own request fits; the
// first that fits nowhere holds back the rest of its sweep, says its own
// request, and has the node with the most room held for it.
func TestDecideEachJobItsOwnRequest(t *testing.T) {
	g := sweepOf(1001, 10, 6, 0)
	sizes := []float64{64, 400, 64, 600, 32, 32}
	for i, m := range sizes {
		g.Pending[i].Req.MemBytes = int64(m) * mb
	}
	other := sweepOf(1002, 20, 40, 64*mb)
	nodes := nodes4(300, 300, 500, 700) // room 468, 468, 268, 68
	in := Input{Heard: known, Groups: []Group{g, other}, Running: map[uint32]int{1001: 0, 1002: 5}, Nodes: nodes, Max: RoundMax}
	d := Decide(in, rand.New(rand.NewSource(1)))
	room := map[string]float64{}
	for _, x := range nodes {
		room[x.ID] = x.MemJobsMB - x.MemHeldMB
	}
	var mine []int
	for _, s := range d.Starts {
		mb := 64.0
		if s.Key == g.Key {
			mine = append(mine, s.Index)
			mb = sizes[s.Index]
		}
		if room[s.Node] < mb {
			t.Fatalf("%+v: %.0f MiB on node %s with %.0f MiB of room left", s, mb, s.Node, room[s.Node])
		}
		room[s.Node] -= mb
	}
	// Index 3's 600M fits nowhere: it waits, and so do 4 and 5 behind it.
	if !slices.Equal(mine, []int{0, 1, 2}) {
		t.Fatalf("user 1001's starts are indices %v: 0, 1 and 2 start, each where its own request fits", mine)
	}
	if d.Why[g.Key] != "no node has room for --mem 600M now" {
		t.Fatalf("why %q: the waiting job's own request", d.Why[g.Key])
	}
	// A preemption for it must free room for 600M, not for the 64M of
	// the sweep's first index.
	if d.Short[g.Key] != 3 || d.NeedMB[g.Key] != 600 {
		t.Fatalf("short %d, need %.0f MiB: 3 fresh jobs wait, the first for 600M", d.Short[g.Key], d.NeedMB[g.Key])
	}
	// The node with the most room is held for it: user 1002's 64M jobs
	// do not fill every node.
	held := 0
	for _, r := range room {
		if r >= 64 {
			held++
		}
	}
	if held != 1 || d.RoomMB == nil {
		t.Fatalf("room left by node %v: one node is held for the 600M job, the others filled", room)
	}
}

// Properties, whatever the groups, nodes and placement: no node is given
// more than its room; a round starts at most Max; no job starts twice nor
// past its sweep's --max-running; a user with nothing running and a job
// that fits somewhere gets a start before any user with more running
// gets a second; and every group left with jobs that may start has a
// reason.
func TestDecideProperties(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var nodes []sched.NodeLoad
		for i := range rapid.IntRange(0, 6).Draw(t, "nodes") {
			jobs := float64(rapid.IntRange(0, 4).Draw(t, "jobs") * 256)
			nodes = append(nodes, sched.NodeLoad{ID: fmt.Sprint(i + 1), Capacity: 0.5 * float64(rapid.IntRange(1, 4).Draw(t, "cap")),
				MemJobsMB: jobs, MemHeldMB: rapid.Float64Range(0, jobs+100).Draw(t, "held"), Draining: rapid.IntRange(0, 9).Draw(t, "drain") == 0})
		}
		var groups []Group
		running := map[uint32]int{}
		seq := uint64(1)
		for range rapid.IntRange(0, 6).Draw(t, "groups") {
			uid := uint32(rapid.IntRange(1, 3).Draw(t, "uid"))
			g := sweepOf(uid, seq, rapid.IntRange(0, 40).Draw(t, "pending"), int64(rapid.SampledFrom([]int{0, 64, 160, 512}).Draw(t, "mem"))*mb)
			if rapid.Bool().Draw(t, "each its own") { // --mem {N}
				for k := range g.Pending {
					g.Pending[k].Req.MemBytes = int64(rapid.SampledFrom([]int{0, 64, 160, 512}).Draw(t, "its mem")) * mb
				}
			}
			g.MaxRunning = rapid.IntRange(0, 5).Draw(t, "max")
			g.Running = rapid.IntRange(0, 5).Draw(t, "running")
			if rapid.IntRange(0, 5).Draw(t, "on") == 0 {
				g.On = fmt.Sprint(rapid.IntRange(1, 7).Draw(t, "onnode"))
			}
			running[uid] += g.Running
			seq += 100
			groups = append(groups, g)
		}
		at := time.Unix(1000, 0)
		heard, refused := map[string]time.Time{}, map[string]time.Time{}
		for _, x := range nodes {
			heard[x.ID] = at
			if r := rapid.IntRange(0, 3).Draw(t, "refused"); r > 0 {
				refused[x.ID] = at.Add(time.Duration(r-2) * time.Second)
			}
		}
		in := Input{Groups: groups, Running: running, Nodes: nodes, Max: rapid.IntRange(1, 60).Draw(t, "max"),
			Placement: rapid.SampledFrom(sched.Placements).Draw(t, "placement"), Heard: heard, Refused: refused}
		d := Decide(in, rand.New(rand.NewSource(rapid.Int64().Draw(t, "seed"))))
		if len(d.Starts) > in.Max {
			t.Fatalf("%d starts, max %d", len(d.Starts), in.Max)
		}
		held := map[string]float64{}
		seen := map[string]bool{}
		perGroup := map[string]int{}
		req, jobReq := map[string]Group{}, map[string]resources.Request{}
		for _, g := range groups {
			req[g.Key] = g
			for _, j := range g.Pending {
				jobReq[j.ID] = j.Req
			}
		}
		for _, s := range d.Starts {
			if seen[s.ID] {
				t.Fatalf("%s started twice", s.ID)
			}
			seen[s.ID] = true
			g := req[s.Key]
			held[s.Node] += jobReq[s.ID].MemMB()
			perGroup[s.Key]++
			if g.On != "" && s.Node != g.On {
				t.Fatalf("%s of --on %s started on %s", s.ID, g.On, s.Node)
			}
			if r, ok := refused[s.Node]; ok && r.After(at) {
				t.Fatalf("%s started on %s, which refused a start since its entry", s.ID, s.Node)
			}
		}
		for _, x := range nodes {
			if held[x.ID] > 0 && (x.Draining || x.MemHeldMB+held[x.ID] > x.MemJobsMB+1e-3 && x.MemJobsMB > 0) {
				t.Fatalf("node %+v given %.0f MiB", x, held[x.ID])
			}
		}
		for _, g := range groups {
			if g.MaxRunning > 0 && perGroup[g.Key] > 0 && g.Running+perGroup[g.Key] > g.MaxRunning {
				t.Fatalf("group %s: %d running, %d started, --max-running %d", g.Key, g.Running, perGroup[g.Key], g.MaxRunning)
			}
			left := len(g.Pending) - perGroup[g.Key]
			if left > 0 && d.Why[g.Key] == "" {
				t.Fatalf("group %s keeps %d pending with no reason: %v", g.Key, left, d.Why)
			}
		}
	})
}

// The first start of a user with none running comes before the second
// of any other user, when room is scarce: the order of a round's starts
// never gives a user a job while another user with fewer running (and a
// job that fits where room is left) waits.
func TestDecideOrderIsMaxMin(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var groups []Group
		running := map[uint32]int{}
		for u := range rapid.IntRange(1, 4).Draw(t, "users") {
			uid := uint32(1001 + u)
			running[uid] = rapid.IntRange(0, 10).Draw(t, "running")
			groups = append(groups, sweepOf(uid, uint64(100*u+1), rapid.IntRange(1, 30).Draw(t, "pending"), 0))
		}
		d := Decide(Input{Heard: known, Groups: groups, Running: running, Nodes: nodes4(0, 0), Max: rapid.IntRange(1, 40).Draw(t, "max")}, rand.New(rand.NewSource(1)))
		count := map[uint32]int{}
		for u, n := range running {
			count[u] = n
		}
		left := map[uint32]int{}
		for _, g := range groups {
			left[g.UID] = len(g.Pending)
		}
		for _, s := range d.Starts {
			var uid uint32
			for _, g := range groups {
				if g.Key == s.Key {
					uid = g.UID
				}
			}
			for u, n := range count {
				if u != uid && left[u] > 0 && n < count[uid] {
					t.Fatalf("user %d (%d running) started a job while user %d (%d running) waited", uid, count[uid], u, n)
				}
			}
			count[uid]++
			left[uid]--
		}
	})
}

// An allocation's group starts on its nodes only (Group.Within), spread
// over them by the placement, though the others are idle; another group
// of the same round goes anywhere.
func TestDecideStartsWithinTheAllocation(t *testing.T) {
	g := sweepOf(1001, 10, 6, 0)
	g.MaxRunning, g.Within = 4, []string{"2", "3"}
	other := sweepOf(1002, 20, 2, 0)
	d := Decide(Input{Heard: known, Groups: []Group{g, other}, Nodes: nodes4(0, 0, 0, 0), Placement: "least-loaded", Max: RoundMax}, rand.New(rand.NewSource(1)))
	in := map[string]int{}
	for _, s := range d.Starts {
		if s.Key == g.Key {
			in[s.Node]++
		}
	}
	if in["2"] != 2 || in["3"] != 2 || len(in) != 2 {
		t.Fatalf("the allocation's starts by node %v, want 2 on each of its nodes 2 and 3", in)
	}
	if n := len(d.Starts); n != 6 {
		t.Fatalf("%d starts, want the allocation's 4 and the other's 2", n)
	}
	g.Within = []string{"9"}
	d = Decide(Input{Heard: known, Groups: []Group{g}, Nodes: nodes4(0, 0, 0, 0), Max: RoundMax}, rand.New(rand.NewSource(1)))
	if len(d.Starts) != 0 || d.Why[g.Key] == "" {
		t.Fatalf("an allocation with no live node: %+v", d)
	}
}
