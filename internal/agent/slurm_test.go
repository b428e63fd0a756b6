package agent

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/api"
	"roam/internal/slurm"
)

// askSlurm is every harness node's Parts.Slurm: the test's c.slurm.
func (c *cluster) askSlurm(pid int32, id string) (string, slurm.Job, error) {
	if c.slurm == nil {
		return "", slurm.Job{}, errors.New("no Slurm in this test")
	}
	return c.slurm(pid, id)
}

// A run that names its Slurm job (SLURM_JOB_ID) is placed on the job's
// nodes only, by their Slurm names, and moved among them only, by the
// policy or by hand, each job's records naming the Slurm job (whose
// extern step its process joins on its node) and the allocation's nodes;
// every refusal is one line naming SLURM_JOB_ID and keeps no job: a
// caller in no Slurm job or another one, another user's job, one not
// running, a node outside the job, a run that asks for memory.
func TestAgentsRunInsideASlurmJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 4, 46, faults{}, "balance", slurmNodeNames)
		const user, inJob, outside = 70701, 100, 101
		state := "RUNNING"
		c.slurm = func(pid int32, id string) (string, slurm.Job, error) {
			if id != "7" {
				return "", slurm.Job{}, slurm.ErrRefused
			}
			callerJob := map[int32]string{inJob: "7", outside: ""}[pid]
			return callerJob, slurm.Job{ID: "7", UID: user, State: state, Nodes: []string{"s1", "s2", "s3"}}, nil
		}
		who := Caller{UID: user, GID: user, PID: inJob}
		run := func(i int, w Caller, req api.RunRequest) (api.RunResponse, error) {
			req.Argv, req.Cwd, req.SlurmJob = []string{"/bin/true"}, "/", "7"
			if req.Count == 0 {
				req.Count = 9 // 3 a CPU: none pending (TestAgentsQueueInsideASlurmJob)
			}
			return c.nodes[i].a.launch.Run(w, req)
		}
		resp, err := run(0, who, api.RunRequest{})
		if err != nil {
			t.Fatal(err)
		}
		c.waitRunning(resp.IDs...)
		for _, id := range resp.IDs {
			if r := c.homeRec(id); r.Slurm != "7" || !slices.Equal(r.Within, []string{"n1", "n2", "n3"}) || r.Node == "n4" {
				t.Fatalf("%s: node %s, Slurm job %q on %v", id, r.Node, r.Slurm, r.Within)
			}
		}
		// The policy would balance the load onto n4, idle: they stay off it.
		time.Sleep(time.Minute)
		if on := c.runningOn(resp.IDs); on["n4"] > 0 || len(on) == 0 {
			t.Fatalf("running on %v", on)
		}
		// By hand: to another node of the allocation, and not to n4.
		id := resp.IDs[0]
		from := nodeIndex(c.homeRec(id).Node)
		to := "n1"
		if from == 0 {
			to = "n2"
		}
		if m, err := c.nodes[from].a.out.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: to}); err != nil || !m.OK {
			t.Fatalf("migrate %s to %s, in the allocation: %+v %v", id, to, m, err)
		}
		c.waitFor("the move", time.Minute, func() bool { return c.homeRec(id).Node == to })
		if l, ok := c.nodes[nodeIndex(to)].a.jobs.LocalRec(id); !ok || l.Slurm != "7" || !slices.Equal(l.Within, []string{"n1", "n2", "n3"}) {
			t.Fatalf("%s at %s: %+v", id, to, l)
		}
		if m, err := c.nodes[nodeIndex(to)].a.out.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: "n4"}); err == nil || m.OK || !strings.Contains(err.Error(), "Slurm job 7") {
			t.Fatalf("migrate %s to n4, outside the allocation: %+v %v", id, m, err)
		}
		if run, _ := c.world.copies(id); len(run) != 1 || run[0] != to {
			t.Fatalf("%s runs on %v after a refused move", id, run)
		}
		for _, tc := range []struct {
			name string
			node int
			who  Caller
			req  api.RunRequest
			want string
		}{
			{"outside any job", 0, Caller{UID: user, PID: outside}, api.RunRequest{}, "runs in no Slurm job"},
			{"another user", 0, Caller{UID: user + 1, PID: inJob}, api.RunRequest{}, "not the caller's"},
			{"a node outside", 3, who, api.RunRequest{}, "has no node s4"},
			{"--on outside", 0, who, api.RunRequest{On: "n4"}, "not one of the Slurm job's"},
			{"--mem", 0, who, api.RunRequest{MemBytes: 64 << 20}, "takes no --mem"},
			{"--checkpoint-every", 0, who, api.RunRequest{Count: 1, CheckpointEvery: time.Hour}, "--checkpoint-every"},
		} {
			before := c.userJobs(user)
			_, err := run(tc.node, tc.who, tc.req)
			if err == nil || !strings.Contains(err.Error(), slurm.Field) || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: %v, want one line naming %s and %q", tc.name, err, slurm.Field, tc.want)
			}
			if after := c.userJobs(user); after != before {
				t.Errorf("%s: the refused run kept jobs (%d, then %d)", tc.name, before, after)
			}
		}
		state = "COMPLETING"
		if _, err := run(0, who, api.RunRequest{}); err == nil || !strings.Contains(err.Error(), "COMPLETING, not RUNNING") {
			t.Errorf("a job that is ending: %v", err)
		}
	})
}

// userJobs counts the live jobs of uid at every home.
func (c *cluster) userJobs(uid uint32) int {
	n := 0
	for _, h := range c.nodes {
		live, _ := h.a.jobs.UserJobs(uid)
		n += live
	}
	return n
}

// slurmNodeNames names each node's Slurm node sK after its id nK, as
// the Slurm tests' controllers know them.
func slurmNodeNames(cfg *Config) { cfg.Slurm.Node = "s" + strings.TrimPrefix(cfg.NodeID, "n") }
