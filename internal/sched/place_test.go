package sched

import (
	"errors"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"roam/internal/resources"
)

func count(ids []string) map[string]int {
	m := map[string]int{}
	for _, id := range ids {
		m[id]++
	}
	return m
}

func TestPlaceSpreadsEvenlyOnEqualNodes(t *testing.T) {
	nodes := []NodeLoad{{ID: "1", Capacity: 1, Load: 0}, {ID: "2", Capacity: 1, Load: 0}, {ID: "3", Capacity: 1, Load: 0}, {ID: "4", Capacity: 1, Load: 0}}
	got, err := PlaceLeastLoaded(nodes, 8, resources.Request{})
	if err != nil {
		t.Fatal(err)
	}
	for id, c := range count(got) {
		if c != 2 {
			t.Fatalf("node %s got %d of 8: %v", id, c, got)
		}
	}
}

func TestPlaceFollowsCapacityAndLoad(t *testing.T) {
	// 0.8 cores idle, 0.2 cores idle: 5 processes go 4 to 1.
	got, _ := PlaceLeastLoaded([]NodeLoad{{ID: "1", Capacity: 0.8, Load: 0}, {ID: "2", Capacity: 0.2, Load: 0}}, 5, resources.Request{})
	if c := count(got); c["1"] != 4 || c["2"] != 1 {
		t.Fatalf("placement %v", got)
	}
	// A loaded node gets nothing until the others catch up.
	got, _ = PlaceLeastLoaded([]NodeLoad{{ID: "1", Capacity: 1, Load: 3}, {ID: "2", Capacity: 1, Load: 0}}, 3, resources.Request{})
	if !slices.Equal(got, []string{"2", "2", "2"}) {
		t.Fatalf("placement %v", got)
	}
	// The input is not modified.
	in := []NodeLoad{{ID: "2", Capacity: 1, Load: 0}, {ID: "1", Capacity: 1, Load: 0}}
	PlaceLeastLoaded(in, 4, resources.Request{})
	if in[0].Load != 0 || in[0].ID != "2" {
		t.Fatalf("input modified: %v", in)
	}
}

func TestPlaceNoNodes(t *testing.T) {
	if _, err := PlaceLeastLoaded(nil, 1, resources.Request{}); !errors.Is(err, ErrNoNode) {
		t.Fatalf("err %v", err)
	}
	if _, err := PlaceLeastLoaded([]NodeLoad{{ID: "1", Capacity: 0, Load: 0}}, 1, resources.Request{}); !errors.Is(err, ErrNoNode) {
		t.Fatalf("err %v", err)
	}
}

// A node whose load was never heard is not taken for idle by a load-based
// placement (past the load vector's size most nodes are such): it counts as
// loaded as the mean of the known nodes. In a cluster that looks idle (just
// up) it is used like the others; round-robin reads no load.
func TestPlaceGuessesUnknownLoad(t *testing.T) {
	busy := []NodeLoad{{ID: "1", Capacity: 1, Load: 2}, {ID: "2", Capacity: 1, Load: 4}, {ID: "3", Capacity: 1, Unknown: true}}
	got, _, err := Place("least-loaded", busy, 3, resources.Request{}, nil, 0)
	if err != nil || !slices.Equal(got, []string{"1", "1", "3"}) {
		t.Fatalf("least-loaded on loads 2, 4 and unknown (taken as 3): %v %v, want [1 1 3]", got, err)
	}
	got, _, _ = Place("random-two", busy, 1, resources.Request{}, rand.New(rand.NewSource(1)), 0)
	if got[0] == "2" {
		t.Fatalf("random-two picked the busiest node: %v", got)
	}
	fresh := []NodeLoad{{ID: "1", Capacity: 1}, {ID: "2", Capacity: 1, Unknown: true}, {ID: "3", Capacity: 1, Unknown: true}, {ID: "4", Capacity: 1, Unknown: true}}
	got, _, _ = Place("least-loaded", fresh, 8, resources.Request{}, nil, 0)
	for id, c := range count(got) {
		if c != 2 {
			t.Fatalf("a cluster just up: node %s got %d of 8: %v", id, c, got)
		}
	}
	got, _, _ = Place("round-robin", busy, 6, resources.Request{}, nil, 0)
	if count(got)["3"] != 2 {
		t.Fatalf("round-robin left out the node of unknown load: %v", got)
	}
	if _, _, err := Place("least-loaded", []NodeLoad{{ID: "3", Capacity: 1, Unknown: true}}, 1, resources.Request{}, nil, 0); !errors.Is(err, ErrNoNode) {
		t.Fatalf("only unknown nodes: %v", err)
	}
}

// Placement passes over a node without room for a process's memory
// request, counts what it placed (memory and slots: a job of --cpus 2
// counts two), and says when a run fits nowhere: now (ErrNoRoom) or ever
// (ErrTooLarge). A node whose memory is not known counts as having room.
func TestPlaceCountsMemoryAndSlots(t *testing.T) {
	mib := func(n int64) resources.Request { return resources.Request{MilliCPUs: 1000, MemBytes: n << 20} }
	nodes := []NodeLoad{{ID: "1", Capacity: 1, MemJobsMB: 256, MemHeldMB: 200}, {ID: "2", Capacity: 1, Load: 3, MemJobsMB: 256}, {ID: "3", Capacity: 1, Load: 1, MemJobsMB: 256, MemHeldMB: 100}}
	for _, kind := range []string{"least-loaded", "random-two", "round-robin"} {
		got, _, err := Place(kind, nodes, 3, mib(128), rand.New(rand.NewSource(1)), 0)
		slices.Sort(got)
		if err != nil || !slices.Equal(got, []string{"2", "2", "3"}) {
			t.Errorf("%s: 3 of 128 MiB went to %v, %v (room: node 2 for two, node 3 for one)", kind, got, err)
		}
		if _, _, err := Place(kind, nodes, 4, mib(128), rand.New(rand.NewSource(1)), 0); !errors.Is(err, ErrNoRoom) || !strings.Contains(err.Error(), "1 of the 4 processes") {
			t.Errorf("%s: a fourth: %v", kind, err)
		}
	}
	fuller := slices.Clone(nodes)
	fuller[1].MemHeldMB = 100
	if err := FitsNowhere(fuller, mib(200)); !errors.Is(err, ErrNoRoom) || !strings.Contains(err.Error(), "node 2, 156 MiB free of the 256") {
		t.Errorf("200 MiB: %v", err)
	}
	if err := FitsNowhere(nodes, mib(300)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("300 MiB: %v", err)
	}
	if err := FitsNowhere(nodes, mib(100)); err != nil {
		t.Errorf("100 MiB: %v", err)
	}
	if err := FitsNowhere(append(slices.Clone(nodes), NodeLoad{ID: "4", Capacity: 1}), mib(300)); err != nil {
		t.Errorf("with a node whose memory is not known: %v", err)
	}
	// Slots: two jobs of --cpus 2 on equal nodes go one to each; four of
	// --cpus 1 two to each.
	eq := []NodeLoad{{ID: "1", Capacity: 4}, {ID: "2", Capacity: 4}}
	got, _ := PlaceLeastLoaded(eq, 3, resources.Request{MilliCPUs: 2000})
	if !slices.Equal(got, []string{"1", "2", "1"}) {
		t.Errorf("--cpus 2: %v", got)
	}
	loaded := []NodeLoad{{ID: "1", Capacity: 4, Load: 0.5}, {ID: "2", Capacity: 4}}
	if got, _ := PlaceLeastLoaded(loaded, 2, resources.Request{MilliCPUs: 3000}); !slices.Equal(got, []string{"2", "1"}) {
		t.Errorf("--cpus 3 after a load of 2 threads on node 1: %v (node 2 at 3/4 with one)", got)
	}
}

// TestPlaceLeastLoadedKeepsTiesHome: a home that knows only equal loads
// (the members it has no entry of guessed at their mean) keeps a new
// process, where the lowest id took every such home's; a less loaded
// node, or a larger one at the same load, still wins over the home.
func TestPlaceLeastLoadedKeepsTiesHome(t *testing.T) {
	for _, tc := range []struct {
		nodes []NodeLoad
		want  string
	}{
		{[]NodeLoad{{ID: "1", Capacity: 1, Load: 1}, {ID: "2", Capacity: 1, Unknown: true}, {ID: "7", Capacity: 1, Load: 1, Self: true}, {ID: "9", Capacity: 1, Load: 1}}, "7"},
		{[]NodeLoad{{ID: "1", Capacity: 1, Unknown: true}, {ID: "3", Capacity: 1, Self: true}}, "3"},
		{[]NodeLoad{{ID: "1", Capacity: 1, Load: 0.5}, {ID: "7", Capacity: 1, Load: 1, Self: true}}, "1"},
		{[]NodeLoad{{ID: "1", Capacity: 2, Load: 1.5}, {ID: "7", Capacity: 1, Load: 1, Self: true}}, "1"},
	} {
		out, _, err := Place("least-loaded", tc.nodes, 1, resources.Request{}, nil, 0)
		if err != nil || len(out) != 1 || out[0] != tc.want {
			t.Errorf("Place(%+v) = %v, %v; want %s", tc.nodes, out, err, tc.want)
		}
	}
	// Two processes from a home among equals: the home, then the lowest id.
	eq := []NodeLoad{{ID: "1", Capacity: 1}, {ID: "2", Capacity: 1}, {ID: "5", Capacity: 1, Self: true}}
	if out, _, _ := Place("least-loaded", eq, 2, resources.Request{}, nil, 0); strings.Join(out, " ") != "5 1" {
		t.Errorf("two processes among equals went to %v, want [5 1]", out)
	}
}
