package cli

import (
	"bytes"
	"strings"
	"testing"
)

// An attached run follows its jobs at the user's request rate: an output
// request the agent refuses past limits.requests_per_second is made again
// after a pause, and no job is given up; the run exits with its jobs'
// status and every line of their output. (A non-root user's attached
// sweep of thousands reaches the rate as its jobs end.)
func TestRunFollowsAtTheRequestRate(t *testing.T) {
	f := startFakeAgent(t, fakeJob{node: "1", stdout: "a\n"}, fakeJob{node: "2", stdout: "b\n", exit: 3}, fakeJob{node: "1", stdout: "c\n"})
	f.overRate = 7
	var out, errOut bytes.Buffer
	code := run([]string{"--socket", f.sock, "run", "-n", "3", "--no-prefix", "--", "prog"}, &out, &errOut)
	if code != 3 {
		t.Fatalf("exit %d, want 3; stderr %q", code, errOut.String())
	}
	for _, l := range []string{"a\n", "b\n", "c\n"} {
		if !strings.Contains(out.String(), l) {
			t.Errorf("output %q lacks %q", out.String(), l)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.limited != 7 || strings.Contains(errOut.String(), "too many") {
		t.Errorf("%d requests refused (want 7); stderr %q", f.limited, errOut.String())
	}
}
