package agent

import (
	"fmt"
	"os"
	"testing"

	"roam/internal/lockorder"
)

// TestMain fails the package's tests when, built with the tag lockcheck,
// any of them took the agent's locks in an order doc.go does not allow.
func TestMain(m *testing.M) {
	lockorder.Collect()
	code := m.Run()
	if v := lockorder.Violations(); len(v) > 0 {
		fmt.Fprintf(os.Stderr, "the agent's lock order (doc.go) was broken %d times; the first:\n%s\n", len(v), v[0])
		seen := map[string]bool{}
		for _, s := range v {
			line := s[:min(len(s), 120)]
			if i := indexLine(s); i > 0 {
				line = s[:i]
			}
			if !seen[line] {
				seen[line] = true
				fmt.Fprintln(os.Stderr, "  "+line)
			}
		}
		code = 1
	}
	os.Exit(code)
}

func indexLine(s string) int {
	for i, c := range s {
		if c == '\n' {
			return i
		}
	}
	return -1
}
