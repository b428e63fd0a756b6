package sched

import (
	"fmt"
	"slices"
	"testing"

	"pgregory.net/rapid"
)

// sortByID puts nodes in IDLess order, as a stable sort does: the small
// path (a load vector's few, sorted on their positions) and the large one
// (sort.Sort) alike. The ids are all numbers (zero-padded or not: equal
// numbers keep their order up to 12, where the sort is by insertion) or
// all not, where IDLess is an order.
func TestSortByIDIsIDLessOrder(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		id := rapid.StringMatching(`[a-c][a-c0-9]{0,2}`)
		if rapid.Bool().Draw(t, "numbers") {
			id = rapid.Custom(func(t *rapid.T) string {
				return fmt.Sprintf("%0*d", rapid.IntRange(1, 3).Draw(t, "width"), rapid.IntRange(0, 30).Draw(t, "n"))
			})
		}
		ids := rapid.SliceOfN(id, 0, 20).Draw(t, "ids")
		nodes := make([]Node, len(ids))
		for i, id := range ids {
			nodes[i] = Node{ID: id, Load: float64(i)}
		}
		want := slices.Clone(nodes)
		slices.SortStableFunc(want, func(a, b Node) int {
			switch {
			case IDLess(a.ID, b.ID):
				return -1
			case IDLess(b.ID, a.ID):
				return 1
			}
			return 0
		})
		sortByID(nodes)
		stable := len(nodes) <= 12
		if !slices.EqualFunc(nodes, want, func(a, b Node) bool {
			if stable {
				return a.ID == b.ID && a.Load == b.Load
			}
			return !IDLess(a.ID, b.ID) && !IDLess(b.ID, a.ID)
		}) {
			t.Fatalf("sortByID gave %v, want %v", ids, want)
		}
	})
}
