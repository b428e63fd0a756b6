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

// A node whose store refuses the records of jobs it just started ends
// them and answers with the error: after its agent's restart it would not
// know them, and they would run on untracked (a node used to log the
// error and keep them running).
func TestAgentsEndJobsTheyCouldNotRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 3, faults{}, "static")
		home, node := c.nodes[0].a, c.nodes[1]
		first := c.run(0, 1, node.name)[0]
		h, seq, _ := strings.Cut(first, ".")
		n, _ := strconv.Atoi(seq)
		next := fmt.Sprintf("%s.%d", h, n+1)
		node.a.store.Close() // every write of node 2's store fails now
		_, err := home.launch.Run(Caller{}, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 1, On: node.name})
		if err == nil || !strings.Contains(err.Error(), "record the job on node") {
			t.Fatalf("a start the node could not record: %v, want its refusal", err)
		}
		c.waitFor("the unrecorded job gone from node 2", time.Minute, func() bool {
			run, frz := c.world.copies(next)
			return len(run)+len(frz) == 0
		})
		if node.a.jobs.IsLocal(next) {
			t.Fatalf("node 2's table holds %s, which its store does not", next)
		}
	})
}
