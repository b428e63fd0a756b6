package agent

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/agent/httpx"
	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/job"
)

// -n 100000 with a 6 MiB environment is refused, each bound named, and
// costs the agent no more than the request itself.
func TestAgentsRefuseARunPastTheLimits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 19, faults{}, "static")
		home := c.nodes[0].a
		env := []string{"BIG=" + strings.Repeat("x", 6<<20)}
		heap := func() uint64 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		h0 := heap()
		user := Caller{UID: 1001, GID: 1001}
		for _, tc := range []struct {
			req  api.RunRequest
			want string
		}{
			{api.RunRequest{Argv: []string{"/bin/true"}, Env: env, Cwd: "/", Count: 100000}, "limits.run_count"},
			{api.RunRequest{Argv: []string{"/bin/true"}, Env: env, Cwd: "/", Count: 1}, "limits.arg_bytes"},
			{api.RunRequest{Argv: []string{"/bin/true"}, Env: []string{"E=" + strings.Repeat("y", 1<<20)}, Cwd: "/", Count: 1000}, "limits.run_bytes"},
		} {
			_, err := home.launch.Run(user, tc.req)
			if err == nil || !errors.Is(err, peer.ErrLimit) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("-n %d: %v; want refused naming %s", tc.req.Count, err, tc.want)
			}
			t.Logf("refused: %v", err)
		}
		h1 := heap()
		n := len(home.jobs.Homes())
		if n != 0 {
			t.Fatalf("%d job records made", n)
		}
		// The environment itself is 6 MiB, held by the test; the agent
		// kept nothing of the refused runs.
		if h1 > h0+4<<20 {
			t.Fatalf("heap %d MiB -> %d MiB", h0>>20, h1>>20)
		}

		// The same request as the CLI sends it, through the API socket's
		// handler: refused with the limit named, and everything the agent
		// allocated for it (decoding the 6 MiB body included) stays under
		// refusedRunAlloc, which docs/security.md states.
		body := fzJSON(t, api.RunRequest{Argv: []string{"/bin/true"}, Env: env, Cwd: "/", Count: 100000})
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		req := httptest.NewRequest(http.MethodPost, api.PathRun, bytes.NewReader(body))
		req = req.WithContext(httpx.WithCaller(req.Context(), user))
		w := httptest.NewRecorder()
		home.apiSrv.Handler.ServeHTTP(w, req)
		runtime.ReadMemStats(&after)
		alloc := after.TotalAlloc - before.TotalAlloc
		if w.Code == http.StatusOK || !strings.Contains(w.Body.String(), "limits.run_count") {
			t.Fatalf("POST %s -n 100000 with a 6 MiB environment: %d %.200s", api.PathRun, w.Code, w.Body)
		}
		if alloc > refusedRunAlloc {
			t.Fatalf("the refused request allocated %d MiB, over %d MiB", alloc>>20, refusedRunAlloc>>20)
		}
		t.Logf("over the API: %d, %d MiB allocated for a %d MiB body", w.Code, alloc>>20, len(body)>>20)
	})
}

// refusedRunAlloc bounds what the agent allocates for a run refused at
// its limits, whatever it asks for: its body is at most maxBody (8 MiB),
// decoded once, and nothing is copied per job before the limits are
// checked.
const refusedRunAlloc = 48 << 20

// A user's live jobs at one home are bounded; another user is not
// affected, and a run that fits again once jobs end goes through.
func TestAgentsBoundLiveJobsPerUser(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 20, faults{}, "static", func(cfg *Config) { cfg.Limits.LiveJobsPerUser = 3 })
		home := c.nodes[0].a
		a, b := Caller{UID: 1001, GID: 1001}, Caller{UID: 1002, GID: 1002}
		run := func(cl Caller, n int) (api.RunResponse, error) {
			return home.launch.Run(cl, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: n, On: "n2"})
		}
		first, err := run(a, 2)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := run(a, 2); err == nil || !strings.Contains(err.Error(), "limits.live_jobs_per_user") {
			t.Fatalf("a third and fourth job: %v", err)
		}
		if _, err := run(b, 3); err != nil {
			t.Fatalf("another user: %v", err)
		}
		if _, err := run(a, 1); err != nil {
			t.Fatalf("a third job: %v", err)
		}
		c.waitFor("running", time.Minute, func() bool { return c.homeRec(first.IDs[0]).State == job.StateRunning })
		for _, id := range first.IDs {
			c.endJob(1, id)
		}
		c.waitFor("ended", time.Minute, func() bool { return c.homeRec(first.IDs[1]).Over() && c.homeRec(first.IDs[0]).Over() })
		if _, err := run(a, 2); err != nil {
			t.Fatalf("after two ended: %v", err)
		}
	})
}

// A job that prints without end is killed once its output passes
// limits.output_bytes, and its record says why (roam ps -l shows it).
func TestAgentsStopAJobPastItsOutputLimit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 21, faults{}, "static", func(cfg *Config) { cfg.Limits.OutputBytes = 1 << 20 })
		home := c.nodes[0].a
		id := c.run(0, 1, "n2")[0]
		c.waitFor("running", time.Minute, func() bool { return c.homeRec(id).State == job.StateRunning })
		f, err := os.OpenFile(filepath.Join(c.nodes[1].fn.SpoolDir(id), "stdout"), os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		line := []byte(strings.Repeat("y", 1023) + "\n")
		for i := 0; i < 1100; i++ { // a little past 1 MiB
			if _, err := f.Write(line); err != nil {
				t.Fatal(err)
			}
		}
		f.Close()
		c.waitFor("killed", time.Minute, func() bool { return c.homeRec(id).State == job.StateFinished })
		r := c.homeRec(id)
		if !strings.Contains(r.EndReason, "limits.output_bytes") || r.ExitCode == nil || *r.ExitCode == 0 {
			t.Fatalf("ended with %v, reason %q", r.ExitCode, r.EndReason)
		}
		var shown string
		for _, j := range home.PS(Caller{}, true) {
			if j.ID == id {
				shown = j.EndReason
			}
		}
		if shown != r.EndReason {
			t.Fatalf("ps shows %q, the record %q", shown, r.EndReason)
		}
		t.Logf("exit %d: %s", *r.ExitCode, r.EndReason)
	})
}

// roam purge removes the caller's ended jobs at every home, and nothing
// else: not a running job, not another user's; root may purge another
// user's, a user may not.
func TestAgentsPurge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 22, faults{}, "static")
		a, b := Caller{UID: 1001, GID: 1001}, Caller{UID: 1002, GID: 1002}
		start := func(i int, cl Caller, n int) []string {
			r, err := c.nodes[i].a.launch.Run(cl, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: n, On: "n2"})
			if err != nil {
				t.Fatal(err)
			}
			return r.IDs
		}
		aEnded := append(start(0, a, 2), start(1, a, 1)...)
		aRunning := start(0, a, 1)[0]
		bEnded := start(0, b, 1)[0]
		c.waitFor("running", time.Minute, func() bool { return c.homeRec(bEnded).State == job.StateRunning })
		for _, id := range append(aEnded, bEnded) {
			c.endJob(1, id)
		}
		c.waitFor("ended", time.Minute, func() bool {
			for _, id := range append(aEnded, bEnded) {
				if !c.homeRec(id).Over() {
					return false
				}
			}
			return true
		})
		if _, err := c.nodes[0].a.news.Purge(a, api.PurgeRequest{UID: &b.UID}); !errors.Is(err, peer.ErrPermission) {
			t.Fatalf("user a purging user b: %v", err)
		}
		if _, err := c.nodes[0].a.news.Purge(a, api.PurgeRequest{All: true}); !errors.Is(err, peer.ErrPermission) {
			t.Fatalf("user a purging all: %v", err)
		}
		res, err := c.nodes[0].a.news.Purge(a, api.PurgeRequest{})
		if err != nil || res.Removed != 3 {
			t.Fatalf("purge: %+v %v; want 3 removed (two homes)", res, err)
		}
		for _, id := range aEnded {
			if r := c.homeRec(id); r.ID != "" {
				t.Fatalf("%s still recorded", id)
			}
			if _, err := os.Stat(c.nodes[nodeIndex(id)].a.spools.Dir(id)); err == nil {
				t.Fatalf("%s's output is still kept", id)
			}
		}
		if c.homeRec(aRunning).State != job.StateRunning || c.homeRec(bEnded).ID == "" {
			t.Fatal("purge removed a running job or another user's")
		}
		if res, err := c.nodes[1].a.news.Purge(Caller{}, api.PurgeRequest{UID: &b.UID}); err != nil || res.Removed != 1 {
			t.Fatalf("root purging user b: %+v %v", res, err)
		}
	})
}

// endJob ends job id running on node i, as a SIGTERM would.
func (c *cluster) endJob(i int, id string) {
	c.t.Helper()
	a := c.nodes[i].a
	rec, here := a.jobs.LocalRec(id)
	if !here {
		c.t.Fatalf("%s does not run on %s", id, c.nodes[i].name)
	}
	if err := c.nodes[i].fn.Signal(rec.PID, syscall.SIGTERM); err != nil {
		c.t.Fatal(err)
	}
}

// A user's jobs on one node that together pass the user's output budget
// there (limits.output_bytes_per_user, in allocated blocks) are killed,
// each well under its own output_bytes, and their records say why;
// another user's job on that node runs on and its output reaches its
// home.
func TestAgentsStopAUsersJobsPastTheirOutputBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 57, faults{}, "static", func(cfg *Config) { cfg.Limits.OutputBytesPerUser = 1 << 20 })
		start := func(who Caller, n int) []string { return c.runAs(who, n, "n2") }
		a, b := Caller{UID: 1001, GID: 1001}, Caller{UID: 1002, GID: 1002}
		flood, other := start(a, 8), start(b, 1)[0]
		c.waitRunning(append(flood, other)...)
		write := func(id string, data []byte) { c.appendOutput(1, id, data) }
		chunk := []byte(strings.Repeat("y", 256<<10-1) + "\n")
		for _, id := range flood {
			write(id, chunk) // 2 MiB together, 256 KiB each
		}
		c.waitFor("killed", time.Minute, func() bool {
			for _, id := range flood {
				if c.homeRec(id).State != job.StateFinished {
					return false
				}
			}
			return true
		})
		for _, id := range flood {
			if r := c.homeRec(id); !strings.Contains(r.EndReason, "limits.output_bytes_per_user") {
				t.Fatalf("job %s ended: %q", id, r.EndReason)
			}
		}
		if r := c.homeRec(other); r.State != job.StateRunning {
			t.Fatalf("the other user's job: %s %q", r.State, r.EndReason)
		}
		write(other, []byte("still here\n"))
		c.waitFor("the other's output", time.Minute, func() bool { return c.homeOutput(other) == "still here\n" })
		t.Logf("ended: %s", c.homeRec(flood[0]).EndReason)
	})
}

// TestAgentsKeepTheStateDisksReserve: a node whose state disk falls below
// limits.disk_reserve_bytes kills the jobs of the user whose output holds
// the most of it, starts no job until the space is back, and leaves the
// jobs of a user with little output running and reporting.
func TestAgentsKeepTheStateDisksReserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const reserve = 64 << 20
		c := newCluster(t, 2, 58, faults{}, "static", func(cfg *Config) { cfg.Limits.DiskReserveBytes = reserve })
		start := func(who Caller, n int) ([]string, error) {
			r, err := c.nodes[0].a.launch.Run(who, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: n, On: "n2"})
			return r.IDs, err
		}
		a, b := Caller{UID: 1001, GID: 1001}, Caller{UID: 1002, GID: 1002}
		flood, err := start(a, 4)
		if err != nil {
			t.Fatal(err)
		}
		others, err := start(b, 1)
		if err != nil {
			t.Fatal(err)
		}
		other := others[0]
		c.waitRunning(append(flood, other)...)
		write := func(id string, data []byte) { c.appendOutput(1, id, data) }
		for _, id := range flood {
			write(id, []byte(strings.Repeat("y", 512<<10-1)+"\n")) // 2 MiB together
		}
		write(other, []byte("small\n"))
		c.waitFor("the output at home", time.Minute, func() bool { return c.homeOutput(other) == "small\n" })
		// 1 MiB short of the reserve: user a's 2 MiB covers it, b's 4 KiB
		// is not worth killing.
		c.nodes[1].free.Store(reserve - 1<<20)
		c.waitFor("killed", time.Minute, func() bool {
			for _, id := range flood {
				if c.homeRec(id).State != job.StateFinished {
					return false
				}
			}
			return true
		})
		for _, id := range flood {
			if r := c.homeRec(id); !strings.Contains(r.EndReason, "limits.disk_reserve_bytes") || !strings.Contains(r.EndReason, "user 1001") {
				t.Fatalf("job %s ended: %q", id, r.EndReason)
			}
		}
		if _, err := start(b, 1); err == nil || !strings.Contains(err.Error(), "limits.disk_reserve_bytes") {
			t.Fatalf("a start on a node short of its reserve: %v", err)
		}
		write(other, []byte("still here\n"))
		c.waitFor("the other's output", time.Minute, func() bool { return c.homeOutput(other) == "small\nstill here\n" })
		if r := c.homeRec(other); r.State != job.StateRunning {
			t.Fatalf("the other user's job: %s %q", r.State, r.EndReason)
		}
		c.nodes[1].free.Store(0)
		if _, err := start(b, 1); err != nil {
			t.Fatalf("a start once the space is back: %v", err)
		}
		t.Logf("ended: %s", c.homeRec(flood[0]).EndReason)
	})
}

// TestAgentsHoldTheBudgetsBetweenTicks: a node whose state disk stands
// still looks at it only at its holds, 20 times a second; one whose disk
// fell fast at a hold (limits.WatchClosely) looks every 5 ms for a
// second after, and holds the budgets at once when the disk fell by more
// than a user's output budget, not at the next hold 50 ms on: jobs
// writing as fast as they can fill a tmpfs of hundreds of MiB in a hold
// period. The first user's job passing its budget is killed at a hold;
// the four after it, at four phases of the hold period, each within two
// looks at the disk; so is a job whose user, near the budget, writes
// less than a budget more.
func TestAgentsHoldTheBudgetsBetweenTicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 60, faults{}, "static", func(cfg *Config) { cfg.Limits.OutputBytesPerUser = 1 << 20 })
		var ids []string
		for k := range 5 {
			who := Caller{UID: uint32(1001 + k), GID: uint32(1001 + k)}
			ids = append(ids, c.runAs(who, 1, "n2")...)
		}
		near := c.runAs(Caller{UID: 1010, GID: 1010}, 1, "n2")[0]
		c.waitRunning(append(ids, near)...)
		free := int64(1 << 40) // far above twice the reserve
		c.nodes[1].free.Store(free)
		time.Sleep(time.Second) // holds saw the disk so
		n2 := c.nodes[1]
		before := n2.looks.Load()
		time.Sleep(time.Second)
		if looks := n2.looks.Load() - before; looks > 40 {
			t.Fatalf("node 2 looked at its still disk %d times in a second, not only at its 20 holds", looks)
		} else {
			t.Logf("node 2 looked at its still disk %d times in a second", looks)
		}
		// write writes n bytes for job id and says when its node killed it
		// (wait: not within it).
		write := func(id string, n int, wait time.Duration) time.Duration {
			rec, _ := n2.a.jobs.LocalRec(id)
			c.appendOutput(1, id, []byte(strings.Repeat("y", n-1)+"\n"))
			free -= int64(n)
			n2.free.Store(free)
			began := time.Now()
			for n2.fn.Alive(rec.PID, rec.StartTix) && time.Since(began) < wait {
				time.Sleep(time.Millisecond)
			}
			return time.Since(began)
		}
		for k, id := range ids {
			took, within := write(id, 2<<20, time.Second), 2*diskWatchEvery
			if k == 0 {
				within = holdEvery + within // the disk stood still: its next hold
			}
			if took > within {
				t.Fatalf("job %s, past its user's budget, killed %v after, not within %v", id, took, within)
			}
			t.Logf("%s killed after %v", id, took)
			time.Sleep(7 * time.Millisecond) // the next at another phase of the hold period
		}
		// A user near the budget: 3/4 of it written, held once, then half
		// of it more, less than a whole budget: killed within two looks.
		if took := write(near, 3<<18, holdEvery+diskWatchEvery); took < holdEvery+diskWatchEvery {
			t.Fatalf("job %s killed under its user's budget", near)
		}
		if took := write(near, 1<<19, time.Second); took > 2*diskWatchEvery {
			t.Fatalf("job %s, past its user's budget by less than a budget, killed %v after, not within %v", near, took, 2*diskWatchEvery)
		}
	})
}

// diskWatchEvery is how often a node with jobs looks at its state disk
// when it watches it closely (news.diskEvery), and holdEvery how often
// it holds its budgets (news.pushEvery).
const diskWatchEvery, holdEvery = 5 * time.Millisecond, 50 * time.Millisecond

// waitRunning waits until the homes have every job of ids running.
func (c *cluster) waitRunning(ids ...string) {
	c.waitFor("running", time.Minute, func() bool {
		for _, id := range ids {
			if c.homeRec(id).State != job.StateRunning {
				return false
			}
		}
		return true
	})
}

// appendOutput writes data to job id's stdout on node i, as the job would.
func (c *cluster) appendOutput(i int, id string, data []byte) {
	f, err := os.OpenFile(filepath.Join(c.nodes[i].fn.SpoolDir(id), "stdout"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		c.t.Fatal(err)
	}
}
