package agent

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/job"
	"roam/internal/resources"
	"roam/internal/sched"
)

// A run's --cpus and --mem, or the home's defaults for what it leaves out,
// are the job's request: in its home record, in the spec its node starts
// (with the thread variables the user did not set), in the restore of a
// migration on the destination and in the local record there, and in
// roam ps. A bad value is refused naming its flag, and records nothing.
func TestRequestsTravelWithTheJob(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 41, faults{}, "static", func(c *Config) { c.Jobs.DefaultMemBytes = 32 << 20 })
		a1, a2 := c.nodes[0].a, c.nodes[1].a
		user := Caller{UID: 1001, GID: 1001}
		asked := resources.Request{MilliCPUs: 1500, MemBytes: 64 << 20}
		r, err := a1.launch.Run(user, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 1, On: "n2", CPUs: 1.5, MemBytes: 64 << 20,
			Env: []string{"OMP_NUM_THREADS=7"}})
		if err != nil {
			t.Fatal(err)
		}
		id := r.IDs[0]
		if got := c.homeRec(id).Req; got != asked {
			t.Fatalf("home record's request %+v, want %+v", got, asked)
		}
		// A run with --mem starts from its home's queue (queue_test.go).
		c.waitFor("the job to run on n2", time.Minute, func() bool { return c.homeRec(id).State == job.StateRunning })
		c.nodes[1].fn.mu.Lock()
		sp := c.nodes[1].fn.started[len(c.nodes[1].fn.started)-1]
		c.nodes[1].fn.mu.Unlock()
		if sp.Req != asked {
			t.Errorf("the node started it with %+v", sp.Req)
		}
		for _, v := range []string{"OMP_NUM_THREADS=7", "OPENBLAS_NUM_THREADS=2", "MKL_NUM_THREADS=2"} {
			if !slices.Contains(sp.Env, v) {
				t.Errorf("its environment %q lacks %s", sp.Env, v)
			}
		}
		if slices.Contains(sp.Env, "OMP_NUM_THREADS=2") {
			t.Errorf("the user's OMP_NUM_THREADS was set over: %q", sp.Env)
		}
		if m, err := a1.out.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: "n1"}); err != nil || !m.OK {
			t.Fatalf("migrate: %+v %v", m, err)
		}
		c.nodes[0].fn.mu.Lock()
		rs := c.nodes[0].fn.restores[len(c.nodes[0].fn.restores)-1]
		c.nodes[0].fn.mu.Unlock()
		if rs.Req != asked {
			t.Errorf("the destination restored it with %+v", rs.Req)
		}
		if l, ok := a1.jobs.LocalRec(id); !ok || l.Req != asked {
			t.Errorf("the destination's local record: %+v (%v)", l.Req, ok)
		}
		ps := a2.PS(Caller{}, true)
		if i := slices.IndexFunc(ps, func(j api.Job) bool { return j.ID == id }); i < 0 || ps[i].CPUs != 1.5 || ps[i].MemBytes != 64<<20 {
			t.Errorf("roam ps: %+v", ps)
		}
		// The home's defaults: jobs.default_cpus (1) and default_mem_bytes.
		d, err := a1.launch.Run(user, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 1, On: "n2"})
		if err != nil {
			t.Fatal(err)
		}
		if got := c.homeRec(d.IDs[0]).Req; got != (resources.Request{MilliCPUs: 1000, MemBytes: 32 << 20}) {
			t.Errorf("defaults: %+v", got)
		}
		before := len(a1.jobs.Homes())
		for _, bad := range []struct {
			req  api.RunRequest
			flag string
		}{
			{api.RunRequest{CPUs: 0.0001}, "--cpus"}, {api.RunRequest{CPUs: -2}, "--cpus"}, {api.RunRequest{CPUs: 1.0005}, "--cpus"},
			{api.RunRequest{MemBytes: 1}, "--mem"}, {api.RunRequest{MemBytes: -1 << 20}, "--mem"}, {api.RunRequest{MemBytes: 1 << 55}, "--mem"},
		} {
			rq := bad.req
			rq.Argv, rq.Cwd, rq.Count = []string{"/bin/true"}, "/", 1
			if _, err := a1.launch.Run(user, rq); err == nil || !errors.Is(err, peer.ErrBadRequest) || !strings.HasPrefix(err.Error(), bad.flag) {
				t.Errorf("%+v: %v, want a bad request naming %s", bad.req, err, bad.flag)
			}
		}
		if after := len(a1.jobs.Homes()); after != before {
			t.Errorf("refused runs left %d records", after-before)
		}
	})
}

// A node takes a job only while the memory requests of the jobs it holds
// and this one's fit in what it gives its jobs: placement passes over a
// node without room, a run that never fits is refused, one that fits
// nowhere now (--on a full node too) is pending with the reason, and the
// node itself refuses a start, a migration's check and a policy's move
// it has no room for.
func TestMemoryRequestsAdmitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 43, faults{}, "static", func(c *Config) { c.Jobs.MemoryBytes = 256 << 20 })
		a1, a2 := c.nodes[0].a, c.nodes[1].a
		user := Caller{UID: 1001, GID: 1001}
		run := func(n int, on string, mem int64) (api.RunResponse, error) {
			return a1.launch.Run(user, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: n, On: on, MemBytes: mem})
		}
		// Its nodes are where each job runs once its home's queue started it.
		nodesOf := func(ids []string) []string {
			var on []string
			for _, id := range ids {
				if r, _ := c.world.copies(id); len(r) == 1 {
					on = append(on, r[0])
				}
			}
			slices.Sort(on)
			return on
		}
		r, err := run(2, "", 160<<20)
		if err != nil {
			t.Fatal(err)
		}
		c.waitFor("two jobs of 160 MiB on nodes of 256, one on each", time.Minute, func() bool { return slices.Equal(nodesOf(r.IDs), []string{"n1", "n2"}) })
		r.Nodes = []string{c.homeRec(r.IDs[0]).Node, c.homeRec(r.IDs[1]).Node}
		c.waitFor("n1 to hear that n2 holds 160 MiB", time.Minute, func() bool {
			for _, n := range a1.Nodes() {
				if n.ID == "n2" {
					return n.MemJobsMB == 256 && n.MemHeldMB == 160
				}
			}
			return false
		})
		before := len(a1.jobs.Homes())
		if _, err := run(1, "", 1<<30); !errors.Is(err, peer.ErrBadRequest) || !errors.Is(err, sched.ErrTooLarge) || !strings.Contains(err.Error(), "more than any node gives its jobs") {
			t.Errorf("a job of 1 GiB: %v", err)
		}
		if after := len(a1.jobs.Homes()); after != before {
			t.Errorf("a refused run left %d records", after-before)
		}
		// No room now: pending, with the reason (queue_test.go has the
		// rest of the queue).
		third, err := run(1, "", 160<<20)
		onFull, err2 := run(1, "n2", 160<<20)
		if err != nil || err2 != nil {
			t.Fatalf("a third job of 160 MiB: %v; --on a full node: %v", err, err2)
		}
		c.waitFor("both pending with their reasons", time.Minute, func() bool {
			why := map[string]string{}
			for _, j := range a1.PS(user, false) {
				if j.State == api.StatePending {
					why[j.ID] = j.PendingWhy
				}
			}
			return why[third.IDs[0]] == "no node has room for --mem 160M now" && why[onFull.IDs[0]] == "--on n2: no node has room for --mem 160M now"
		})
		if _, err := a1.control.Kill(user, api.KillRequest{IDs: []string{third.IDs[0], onFull.IDs[0]}, Signal: 15}); err != nil {
			t.Fatal(err)
		}
		c.waitFor("the queue empty", time.Minute, func() bool { return !a1.jobs.ForRoom() })
		// 64 MiB more fits where 160 do not: placement counts what it
		// places, one on each node.
		small, err := run(2, "", 64<<20)
		if err != nil {
			t.Fatalf("two jobs of 64 MiB: %v", err)
		}
		c.waitFor("two jobs of 64 MiB, one on each node", time.Minute, func() bool { return slices.Equal(nodesOf(small.IDs), []string{"n1", "n2"}) })
		// The node judges again what it is asked, against what it holds.
		res := a2.launch.StartHere(peer.StartRequest{Home: "n1", HomeAddr: a1.peers.SelfAddr,
			Jobs: []job.Spec{{ID: "n1.900", Argv: []string{"/bin/true"}, Cwd: "/", Req: resources.Request{MilliCPUs: 1000, MemBytes: 64 << 20}}}})
		if len(res) != 1 || !strings.Contains(res[0].Error, "does not fit on node n2") {
			t.Errorf("a start past n2's memory: %+v", res)
		}
		if _, err := a1.out.Migrate(Caller{}, api.MigrateRequest{ID: r.IDs[slices.Index(r.Nodes, "n1")], Node: "n2"}); err == nil ||
			!strings.Contains(err.Error(), "does not fit on node n2") {
			t.Errorf("a migration to a full node: %v", err)
		}
		ans, err := a2.sched.Admit(sched.Move{Job: "n1.901", From: "n1", To: "n2", Kind: sched.ProblemCPU, SrcLoad: 10, Runnable: 1, MemReqMB: 64})
		if err != nil || !strings.Contains(ans.Refused, "does not fit on node n2") || ans.MemHeldMB != 224 {
			t.Errorf("a policy's move to a full node: %+v %v", ans, err)
		}
	})
}

// A job the kernel's OOM killer acted in ends with its own cgroup's
// reason: roam ps says it ran out of its --mem, with the status of the
// process the kernel killed.
func TestOutOfMemoryIsTheJobsEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 47, faults{}, "static")
		a1 := c.nodes[0].a
		r, err := a1.launch.Run(Caller{UID: 1001, GID: 1001}, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 1, On: "n2", MemBytes: 64 << 20})
		if err != nil {
			t.Fatal(err)
		}
		id := r.IDs[0]
		c.waitFor("the job to run", time.Minute, func() bool { return c.homeRec(id).State == job.StateRunning })
		fn := c.nodes[1].fn
		l, _ := c.nodes[1].a.jobs.LocalRec(id)
		fn.mu.Lock()
		fn.oomKills = map[string]int64{id: 1}
		fn.mu.Unlock()
		fn.Kill(l.PID, l.StartTix, 0)
		c.waitFor("the job to end", time.Minute, func() bool { return c.homeRec(id).State == job.StateFinished })
		rec := c.homeRec(id)
		if rec.EndReason != "out of memory (--mem 64M)" || rec.ExitCode == nil || *rec.ExitCode != 137 {
			t.Errorf("ended with %v, reason %q", rec.ExitCode, rec.EndReason)
		}
	})
}

// A job restarted from its checkpoint after its node died keeps its
// request: its home places it on a node with room for its memory (not
// the home, less loaded but whose jobs hold too much of it), and the
// node that restores it does so into the request's limits.
func TestRestartKeepsTheRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 53, faults{}, "static", func(c *Config) { c.Jobs.MemoryBytes = 256 << 20 })
		home, n2 := c.nodes[0].a, c.nodes[1]
		if _, err := home.launch.Run(Caller{}, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 1, On: "n1", MemBytes: 200 << 20}); err != nil {
			t.Fatal(err)
		}
		if _, err := home.launch.Run(Caller{}, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 3, On: "n3"}); err != nil {
			t.Fatal(err)
		}
		c.waitFor("n1 to hear n3 more loaded than itself", time.Minute, func() bool {
			self, _ := home.members.Self()
			e, ok := home.members.Heard("n3")
			return ok && e.Load > self+1
		})
		asked := resources.Request{MilliCPUs: 500, MemBytes: 64 << 20}
		r, err := home.launch.Run(Caller{}, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 1, On: "n2", CheckpointEvery: 5 * time.Second,
			CPUs: 0.5, MemBytes: 64 << 20})
		if err != nil {
			t.Fatal(err)
		}
		id := r.IDs[0]
		c.waitFor("a checkpoint kept", time.Minute, func() bool { return c.homeRec(id).Newest != nil })
		c.world.mu.Lock()
		c.world.cutOff["n2"] = true
		c.world.mu.Unlock()
		c.net.partition(n2.host, c.nodes[0].host)
		c.net.partition(n2.host, c.nodes[2].host)
		c.waitFor("the job restarted", 2*time.Minute, func() bool {
			rec := c.homeRec(id)
			return rec.Inc == 1 && rec.State == job.StateRunning && rec.Node != "n2"
		})
		if node := c.homeRec(id).Node; node != "n3" {
			t.Errorf("restarted on %s, whose jobs hold 200 of its 256 MiB", node)
		}
		fn := c.nodes[2].fn
		fn.mu.Lock()
		var got []resources.Request
		for _, rs := range fn.restores {
			got = append(got, rs.Req)
		}
		fn.mu.Unlock()
		if len(got) == 0 || got[len(got)-1] != asked {
			t.Errorf("n3 restored it with %+v", got)
		}
		if l, ok := c.nodes[2].a.jobs.LocalRec(id); !ok || l.Req != asked || c.homeRec(id).Req != asked {
			t.Errorf("after the restart: local %+v (%v), home %+v", l.Req, ok, c.homeRec(id).Req)
		}
		c.net.heal()
		c.world.mu.Lock()
		delete(c.world.cutOff, "n2")
		c.world.mu.Unlock()
	})
}
