package agent

import (
	"bytes"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/api"
	"roam/internal/job"
	"roam/internal/slurm"
)

// A job of a Slurm allocation, checkpointed with --stop at the
// allocation's end, restarts in the next allocation (another Slurm job,
// on other nodes): placed on that job's nodes only, its records naming
// the new Slurm job and its nodes; a restart that names the ended job is
// refused, naming SLURM_JOB_ID; one typed in no Slurm job runs in none;
// and the file restarts once while its job runs (never two copies).
func TestRestartInTheNextAllocation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 4, 47, faults{}, "static", slurmNodeNames)
		const user, inFirst, inSecond = 70701, 100, 200
		states := map[string]string{"7": "RUNNING", "8": "RUNNING"}
		nodes := map[string][]string{"7": {"s1", "s2"}, "8": {"s3", "s4"}}
		c.slurm = func(pid int32, id string) (string, slurm.Job, error) {
			if nodes[id] == nil {
				return "", slurm.Job{}, slurm.ErrRefused
			}
			callerJob := map[int32]string{inFirst: "7", inSecond: "8"}[pid]
			return callerJob, slurm.Job{ID: id, UID: user, State: states[id], Nodes: nodes[id]}, nil
		}
		first := Caller{UID: user, GID: user, PID: inFirst}
		resp, err := c.nodes[0].a.launch.Run(first, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 1, SlurmJob: "7"})
		if err != nil {
			t.Fatal(err)
		}
		id := resp.IDs[0]
		c.waitRunning(id)
		w := httptest.NewRecorder()
		if err := c.nodes[0].a.checkpoints.Checkpoint(first, api.CheckpointRequest{ID: id, Stop: true}, w); err != nil || w.Code != 200 {
			t.Fatalf("checkpoint --stop of %s: %v, status %d", id, err, w.Code)
		}
		file := w.Body.Bytes()
		c.waitFor("stopped by its checkpoint", time.Minute, func() bool { return c.homeRec(id).State == job.StateFinished })
		states["7"] = "COMPLETED"

		second := Caller{UID: user, GID: user, PID: inSecond}
		restartAt := func(i int, who Caller, q url.Values) (api.RestartResponse, error) {
			return c.nodes[i].a.checkpoints.Restart(who, q, bytes.NewReader(file), int64(len(file)))
		}
		// The ended allocation's job: refused, before the file is taken.
		if _, err := restartAt(0, first, url.Values{"slurm": {"7"}}); err == nil || !strings.Contains(err.Error(), slurm.Field) || !strings.Contains(err.Error(), "COMPLETED, not RUNNING") {
			t.Fatalf("restart in the ended Slurm job: %v", err)
		}
		res, err := restartAt(2, second, url.Values{"slurm": {"8"}})
		if err != nil {
			t.Fatalf("restart in the next allocation: %v", err)
		}
		if res.Node != "n3" && res.Node != "n4" {
			t.Fatalf("restarted on %s, outside Slurm job 8's nodes", res.Node)
		}
		c.waitRunning(id)
		l, ok := c.nodes[nodeIndex(res.Node)].a.jobs.LocalRec(id)
		if !ok || l.Slurm != "8" || !slices.Equal(l.Within, []string{"n3", "n4"}) {
			t.Fatalf("%s at %s: Slurm job %q on %v, want 8 on [n3 n4]", id, res.Node, l.Slurm, l.Within)
		}
		if run, _ := c.world.copies(id); len(run) != 1 {
			t.Fatalf("%s runs on %v", id, run)
		}
		// The same file again while the job runs: refused, one copy.
		if _, err := restartAt(2, second, url.Values{"slurm": {"8"}}); err == nil {
			t.Fatalf("a second restart of the file while %s runs was taken", id)
		}
		if run, _ := c.world.copies(id); len(run) != 1 {
			t.Fatalf("%s runs on %v after a second restart", id, run)
		}

		// Stopped again, and restarted by a caller in no Slurm job: in none.
		w = httptest.NewRecorder()
		if err := c.nodes[2].a.checkpoints.Checkpoint(second, api.CheckpointRequest{ID: id, Stop: true}, w); err != nil || w.Code != 200 {
			t.Fatalf("checkpoint --stop of %s: %v, status %d", id, err, w.Code)
		}
		file = w.Body.Bytes()
		c.waitFor("stopped by its checkpoint", time.Minute, func() bool { return c.homeRec(id).State == job.StateFinished })
		res, err = restartAt(0, Caller{UID: user, GID: user}, url.Values{"on": {"n1"}})
		if err != nil {
			t.Fatalf("restart outside any Slurm job: %v", err)
		}
		c.waitRunning(id)
		if l, ok := c.nodes[0].a.jobs.LocalRec(id); res.Node != "n1" || !ok || l.Slurm != "" || l.Within != nil {
			t.Fatalf("%s on %s: Slurm job %q on %v, want none", id, res.Node, l.Slurm, l.Within)
		}
	})
}
