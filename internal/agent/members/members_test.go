package members

import (
	"errors"
	"math/rand"
	"net"
	"reflect"
	"strings"
	"testing"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/cpufeat"
	"roam/internal/load"
	"roam/internal/resources"
	"roam/internal/sched"
	"roam/internal/slurm"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newTable(t *testing.T, placement string) *Table {
	t.Helper()
	tb := New(Config{Self: "n1", Capacity: 2, Tau: 4 * time.Second,
		Vector: load.NewDisseminator("n1", 8, load.Policy("fifo"), time.Second),
		Rng:    rand.New(rand.NewSource(1)), Placement: placement})
	tb.Join(Member{Addr: "198.18.0.1:7946", PeerAddr: "198.18.0.1:7947", Capacity: 2, Version: "v"}, 512, t0)
	return tb
}

func up(tb *Table, name, ip, meta string) Change {
	return tb.Up(name, ip+":7946", net.ParseIP(ip), []byte(meta), t0)
}

// A member's metadata comes from the network: out of range or unreadable,
// the member is still listed, alive, with nothing said of it; its peer
// address is its IP and the port it gave.
func TestUpTakesOnlyWhatIsInRange(t *testing.T) {
	tb := newTable(t, "least-loaded")
	if ch := up(tb, "n2", "198.18.0.2", `{"c":4,"p":7947,"d":true,"v":"1.0"}`); !ch.New || !ch.Draining {
		t.Fatalf("first news of a draining member: %+v", ch)
	}
	if ch := up(tb, "n2", "198.18.0.2", `{"c":4,"p":7947,"d":true,"v":"1.0"}`); ch.New || ch.Draining {
		t.Fatalf("the same news again: %+v", ch)
	}
	p, _ := tb.Get("n2")
	if want := (Member{Addr: "198.18.0.2:7946", PeerAddr: "198.18.0.2:7947", Capacity: 4, Alive: true, Since: t0, Draining: true, Version: "1.0"}); p != want {
		t.Fatalf("n2 is %+v, want %+v", p, want)
	}
	for _, bad := range []string{`{"c":-1,"p":7947}`, `{"c":1,"p":65536}`, `junk`} {
		up(tb, "n3", "198.18.0.3", bad)
		if p, _ := tb.Get("n3"); !p.Alive || p.Capacity != 0 || p.PeerAddr != "198.18.0.3:0" {
			t.Errorf("metadata %s: n3 is %+v", bad, p)
		}
	}
	// How it runs users' jobs, and whether it restores them lazily in
	// their user namespaces; an older roam says neither.
	up(tb, "n5", "198.18.0.5", `{"c":1,"p":7947,"u":true,"lu":true}`)
	up(tb, "n6", "198.18.0.6", `{"c":1,"p":7947,"u":true}`)
	if p, _ := tb.Get("n5"); !p.UserNS || !p.LazyUserNS {
		t.Errorf("n5 said it restores jobs lazily in their user namespaces: %+v", p)
	}
	if p, _ := tb.Get("n6"); !p.UserNS || p.LazyUserNS {
		t.Errorf("n6 did not say it restores jobs lazily in their user namespaces: %+v", p)
	}
	up(tb, "n4", "198.18.0.4", `{"c":1,"p":7947,"v":"`+strings.Repeat("x", maxVersion+1)+`"}`)
	if p, _ := tb.Get("n4"); p.Version != "" {
		t.Errorf("a version of %d bytes was kept", len(p.Version))
	}
	if ch := up(tb, "n1", "198.18.0.9", `{"c":9,"p":1}`); ch.New {
		t.Error("a member of this node's own name was taken")
	}
	if p, _ := tb.Get("n1"); p.PeerAddr != "198.18.0.1:7947" || p.Capacity != 2 {
		t.Errorf("this node became %+v", p)
	}
}

// A member that left stays listed, dead since it left; a node never heard
// of is reachable (it may still answer), a dead one is not; Live and
// PeerAddr follow.
func TestDownKeepsTheMemberListedAndDead(t *testing.T) {
	tb := newTable(t, "least-loaded")
	up(tb, "n10", "198.18.0.10", `{"c":1,"p":7947}`)
	up(tb, "n2", "198.18.0.2", `{"c":1,"p":7947}`)
	if got := tb.Live(); !reflect.DeepEqual(got, []string{"n1", "n10", "n2"}) {
		t.Fatalf("live %v, want node order (sched.IDLess)", got)
	}
	later := t0.Add(time.Minute)
	tb.Down("n2", later)
	tb.Down("n1", later) // this node never leaves its own table
	p, ok := tb.Get("n2")
	if !ok || p.Alive || !p.Since.Equal(later) {
		t.Fatalf("n2 after it left: %+v, %v", p, ok)
	}
	if !tb.Alive("n1") || tb.Alive("n2") || tb.Reachable("n2") || !tb.Reachable("n9") || tb.Known("n9") || !tb.Known("n2") {
		t.Fatal("Alive, Reachable or Known disagree with the table")
	}
	if got := tb.Live(); !reflect.DeepEqual(got, []string{"n1", "n10"}) {
		t.Fatalf("live %v", got)
	}
	if _, err := tb.PeerAddr("n9"); !errors.Is(err, peer.ErrUnavailable) || !strings.Contains(err.Error(), "n9") {
		t.Fatalf("peer address of an unknown node: %v", err)
	}
	if ips := tb.IPs(); !ips["198.18.0.1"] || !ips["198.18.0.2"] || len(ips) != 3 {
		t.Fatalf("IPs %v", ips)
	}
}

// --on places every process on that node when it is a live member not
// draining, and says why not otherwise; the policy's placement sees only
// live members, this node with its own drain state.
func TestPlace(t *testing.T) {
	tb := newTable(t, "round-robin")
	up(tb, "n2", "198.18.0.2", `{"c":2,"p":7947}`)
	up(tb, "n3", "198.18.0.3", `{"c":2,"p":7947,"d":true}`)
	up(tb, "n4", "198.18.0.4", `{"c":2,"p":7947}`)
	tb.Down("n4", t0)
	for _, tc := range []struct {
		on, want string
		kind     error
	}{
		{"n9", `no node "n9"`, peer.ErrBadRequest},
		{"n4", "node n4 is not alive", peer.ErrUnavailable},
		{"n3", "node n3 is draining", peer.ErrUnavailable},
	} {
		if _, _, err := tb.Place(tc.on, 1, false, resources.Request{}, 0, cpufeat.Set{}, nil); !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--on %s: %v, want %q", tc.on, err, tc.want)
		}
	}
	if _, _, err := tb.Place("n1", 1, true, resources.Request{}, 0, cpufeat.Set{}, nil); err == nil {
		t.Error("--on this node while it drains was taken")
	}
	if out, why, err := tb.Place("n2", 3, false, resources.Request{}, 0, cpufeat.Set{}, nil); err != nil || !reflect.DeepEqual(out, []string{"n2", "n2", "n2"}) || why != "roam run --on n2" {
		t.Fatalf("--on n2: %v %q %v", out, why, err)
	}
	out, why, err := tb.Place("", 4, false, resources.Request{}, 0, cpufeat.Set{}, nil)
	if err != nil || why != "placement round-robin" {
		t.Fatalf("round-robin: %v %q %v", out, why, err)
	}
	for _, n := range out {
		if n != "n1" && n != "n2" {
			t.Fatalf("round-robin placed on %s (dead or draining): %v", n, out)
		}
	}
	out, _, _ = tb.Place("", 2, true, resources.Request{}, 0, cpufeat.Set{}, nil)
	if !reflect.DeepEqual(out, []string{"n2", "n2"}) {
		t.Fatalf("with this node draining: %v", out)
	}
	tb.SetPlacement("least-loaded", 0)
	if _, why, _ := tb.Place("", 1, false, resources.Request{}, 0, cpufeat.Set{}, nil); why != "placement least-loaded" {
		t.Fatalf("after SetPlacement: %q", why)
	}
}

// Probe smooths the node's load unless it fell to news, sends to the
// dissemination's targets, and the message carries the pending moves'
// load and least CPU time; a peer's entry is live only for a live member.
func TestProbeAndReceive(t *testing.T) {
	tb := newTable(t, "least-loaded")
	up(tb, "n2", "198.18.0.2", `{"c":2,"p":7947}`)
	targets, msg := tb.Probe(t0.Add(time.Second), 4, 300, 4, 0, sched.Node{Load: 0.5, Least: 7})
	if len(targets) == 0 {
		t.Fatal("no target for the first entry")
	}
	e, err := load.DecodeMessage(msg)
	if err != nil {
		t.Fatal(err)
	}
	l, m := tb.Self()
	if l <= 0 || l >= 2 || m != 300 {
		t.Fatalf("self load %v (4 runnable on 2 cores smoothed from 0), memory %v", l, m)
	}
	if e.Node != "n1" || e.Addr != "198.18.0.1:7947" || e.Load != l+0.5 || e.Least != 7 || e.MemFreeMB != 300 {
		t.Fatalf("entry sent %+v, self load %v", e, l)
	}
	if r := tb.Receive(t0.Add(time.Second), load.Entry{Node: "n2", Capacity: 2, Load: 0.1, MemFreeMB: 100}); !r.Kept || !r.Live {
		t.Fatalf("a live member's entry: %+v", r)
	}
	if r := tb.Receive(t0.Add(time.Second), load.Entry{Node: "n7", Capacity: 2, Load: 0.1, MemFreeMB: 100}); r.Live {
		t.Fatalf("an entry of a node membership does not know was live: %+v", r)
	}
	peers := tb.Peers()
	if len(peers) != 1 || peers[0].ID != "n2" || peers[0].Load != 0.1 {
		t.Fatalf("peers %+v", peers)
	}
	nodes := tb.Nodes(t0.Add(2*time.Second), true)
	if len(nodes) != 2 || !nodes[0].Self || !nodes[0].Draining || *nodes[1].Load != 0.1 || *nodes[1].InfoAgeMS != 1000 {
		t.Fatalf("nodes %+v", nodes)
	}
	tb.Down("n2", t0.Add(3*time.Second))
	if _, held := tb.Heard("n2"); held || len(tb.Peers()) != 0 {
		t.Fatal("a member that left is still in the load vector")
	}
}

// A run inside a Slurm allocation is placed on the members its node list
// names (by their Slurm names, from their metadata) and nowhere else, --on
// included, by the CPUs it holds on each; a member whose Slurm name is
// not a node name is in none.
func TestPlaceWithinAllocation(t *testing.T) {
	tb := newTable(t, "least-loaded")
	up(tb, "n2", "198.18.0.2", `{"c":8,"p":7947,"sn":"s2"}`)
	up(tb, "n3", "198.18.0.3", `{"c":8,"p":7947,"sn":"s3"}`)
	up(tb, "n4", "198.18.0.4", `{"c":8,"p":7947,"sn":"bad name"}`)
	for _, n := range []string{"n2", "n3", "n4"} {
		tb.Receive(t0.Add(time.Second), load.Entry{Node: n, Capacity: 8, MemFreeMB: 1000})
	}
	job := slurm.Job{Nodes: []string{"s2", "s3", "bad name", "s9"}, Alloc: map[string]slurm.NodeAlloc{"s2": {CPUs: 3}, "s3": {CPUs: 1}}}
	within := tb.SlurmNodes(job)
	if !reflect.DeepEqual(within, map[string]int{"n2": 3, "n3": 1}) {
		t.Fatalf("SlurmNodes: %v", within)
	}
	out, _, err := tb.Place("", 8, false, resources.Request{}, 0, cpufeat.Set{}, within)
	if err != nil {
		t.Fatal(err)
	}
	per := map[string]int{}
	for _, n := range out {
		per[n]++
	}
	if per["n2"] != 6 || per["n3"] != 2 {
		t.Fatalf("placed %v, want 6 on n2 and 2 on n3 (3 CPUs to 1 of the allocation's)", per)
	}
	if _, _, err := tb.Place("n4", 1, false, resources.Request{}, 0, cpufeat.Set{}, within); !errors.Is(err, peer.ErrBadRequest) || !strings.Contains(err.Error(), "SLURM_JOB_ID") {
		t.Fatalf("--on outside the allocation: %v", err)
	}
	if _, _, err := tb.Place("", 1, false, resources.Request{}, 0, cpufeat.Set{}, map[string]int{}); err == nil {
		t.Fatal("an allocation with none of the members placed a job")
	}
}
