package sched

import (
	"errors"
	"slices"
	"testing"
)

func count(ids []string) map[string]int {
	m := map[string]int{}
	for _, id := range ids {
		m[id]++
	}
	return m
}

func TestPlaceSpreadsEvenlyOnEqualNodes(t *testing.T) {
	nodes := []NodeLoad{{"1", 1, 0}, {"2", 1, 0}, {"3", 1, 0}, {"4", 1, 0}}
	got, err := PlaceLeastLoaded(nodes, 8)
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
	got, _ := PlaceLeastLoaded([]NodeLoad{{"1", 0.8, 0}, {"2", 0.2, 0}}, 5)
	if c := count(got); c["1"] != 4 || c["2"] != 1 {
		t.Fatalf("placement %v", got)
	}
	// A loaded node gets nothing until the others catch up.
	got, _ = PlaceLeastLoaded([]NodeLoad{{"1", 1, 3}, {"2", 1, 0}}, 3)
	if !slices.Equal(got, []string{"2", "2", "2"}) {
		t.Fatalf("placement %v", got)
	}
	// The input is not modified.
	in := []NodeLoad{{"2", 1, 0}, {"1", 1, 0}}
	PlaceLeastLoaded(in, 4)
	if in[0].Load != 0 || in[0].ID != "2" {
		t.Fatalf("input modified: %v", in)
	}
}

func TestPlaceNoNodes(t *testing.T) {
	if _, err := PlaceLeastLoaded(nil, 1); !errors.Is(err, ErrNoNode) {
		t.Fatalf("err %v", err)
	}
	if _, err := PlaceLeastLoaded([]NodeLoad{{"1", 0, 0}}, 1); !errors.Is(err, ErrNoNode) {
		t.Fatalf("err %v", err)
	}
}
