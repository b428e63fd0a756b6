package control

import (
	"strings"
	"testing"

	"roam/internal/api"
)

// TestSortJobsBySequence: roam ps lists each home's jobs by sequence
// number, as numbers (n2.9 before n2.10), the whole range of the job
// table's uint64 sequence included (parsed as an int, every sequence
// past MaxInt64 read as MaxInt64, and their order was lost).
func TestSortJobsBySequence(t *testing.T) {
	js := []api.Job{{ID: "n2.18446744073709551615"}, {ID: "n2.10"}, {ID: "n1.3"}, {ID: "n2.9223372036854775808"}, {ID: "n2.9"}}
	sortJobs(js)
	var got []string
	for _, j := range js {
		got = append(got, j.ID)
	}
	want := []string{"n1.3", "n2.9", "n2.10", "n2.9223372036854775808", "n2.18446744073709551615"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("sorted %v, want %v", got, want)
	}
}
