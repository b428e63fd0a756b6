package agent

import (
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
