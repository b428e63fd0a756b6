package bench

import (
	"errors"
	"testing"
)

// CheckLines: one copy counts up by one; a restart falls back once; two
// copies interleave (a rise by more than one); a fall without a restart
// is a copy that ran unrestarted.
func TestCheckLines(t *testing.T) {
	for _, c := range []struct {
		file       string
		restarts   int
		last       int
		interleave bool
		bad        bool
	}{
		{"", 0, 0, false, false},
		{"1\n2\n3\n", 0, 3, false, false},
		{"1\n2\n3\n4", 0, 3, false, false}, // the last write cut
		{"1\n2\n3\n2\n3\n4\n", 1, 4, false, false},
		{"1\n2\n3\n2\n3\n4\n", 0, 3, false, true},
		{"1\n2\n3\n2\n4\n", 1, 2, true, true},
		{"1\n2\n3\n1\n2\n1\n2\n", 2, 2, false, false},
		{"2\n3\n", 0, 0, true, true},
		{"1\nx\n", 0, 1, false, true},
	} {
		last, err := CheckLines([]byte(c.file), c.restarts)
		if last != c.last || (err != nil) != c.bad || errors.Is(err, ErrInterleave) != c.interleave {
			t.Errorf("%q with %d restarts: %d, %v; want %d, bad %v, interleave %v", c.file, c.restarts, last, err, c.last, c.bad, c.interleave)
		}
	}
}
