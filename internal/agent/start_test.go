package agent

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/api"
)

// A job's record starts when the job began to run on its node, not when
// its home placed it: a node that takes 50 ms to set each job up, four at
// once (launch's startWindow), starts the first four of six 50 ms after the
// run and the last two 100 ms after, and their records, at the home, say so
// (jobtable's TestMarkStarted: also those that ended before the answer
// came).
func TestAgentsRecordWhenAJobRan(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 3, faults{}, "static")
		home, fn := c.nodes[0].a, c.nodes[1].fn
		fn.mu.Lock()
		fn.startTakes = 50 * time.Millisecond
		fn.mu.Unlock()
		t0 := time.Now()
		resp, err := home.launch.Run(sweepUser, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 6, On: c.nodes[1].name})
		if err != nil {
			t.Fatal(err)
		}
		for k, id := range resp.IDs {
			r, err := home.jobs.HomeRecord(id)
			if err != nil {
				t.Fatal(err)
			}
			want := t0.Add(time.Duration(k/4+1) * 50 * time.Millisecond)
			if d := r.Started.Sub(want); d < 0 || d > 5*time.Millisecond || r.State != api.StateRunning {
				t.Errorf("job %s: %s, started %v after the run, want %v", id, r.State, r.Started.Sub(t0), want.Sub(t0))
			}
		}
	})
}

// A run whose output spool the home cannot make is refused, naming it,
// and leaves no record: its jobs' output would have had nowhere to go (a
// home used to ignore the error and report the run started).
func TestAgentsRefuseARunWithoutASpool(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 3, faults{}, "static")
		home := c.nodes[0].a
		first := c.run(0, 1, c.nodes[1].name)[0]
		h, seq, _ := strings.Cut(first, ".")
		n, _ := strconv.Atoi(seq)
		next := fmt.Sprintf("%s.%d", h, n+1)
		// A file where the next job's spool directory goes.
		blocker := home.spools.Dir(next)
		if err := os.WriteFile(blocker, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := home.launch.Run(Caller{}, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 1, On: c.nodes[1].name})
		if err == nil || !strings.Contains(err.Error(), "spool") {
			t.Fatalf("a run without a spool: %v, want a refusal naming the spool", err)
		}
		if _, err := home.jobs.HomeRecord(next); err == nil {
			t.Fatalf("the refused run left a record of %s", next)
		}
		os.Remove(blocker)
		if ids := c.run(0, 1, c.nodes[1].name); len(ids) != 1 {
			t.Fatalf("the next run: %v", ids)
		}
	})
}
