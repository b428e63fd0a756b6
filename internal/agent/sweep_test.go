package agent

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/api"
	"roam/internal/job"
)

// exitJob ends job id wherever it runs with status code, as its program
// exiting would.
func (c *cluster) exitJob(id string, code int) {
	c.t.Helper()
	w := c.world
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.procs {
		if p.job == id && p.state == running {
			if err := os.WriteFile(filepath.Join(p.spool, "status"), []byte(strconv.Itoa(code)+"\n"), 0o600); err != nil {
				c.t.Fatal(err)
			}
			w.ended[id] = true
			w.set(p, gone, "exit")
			return
		}
	}
	c.t.Fatalf("job %s runs nowhere", id)
}

// sweepOf is a sweep's view as its owner asks it of node i.
func (c *cluster) sweepOf(i int, ref string, who Caller) api.Sweep {
	c.t.Helper()
	s, err := c.nodes[i].a.control.Sweep(who, ref)
	if err != nil {
		c.t.Fatalf("sweep %s: %v", ref, err)
	}
	return s
}

// states counts a sweep's jobs by state.
func states(s api.Sweep) map[string]int {
	n := map[string]int{}
	for _, j := range s.Jobs {
		n[j.State]++
	}
	return n
}

var sweepUser = Caller{UID: 1001, GID: 1001}

// A sweep of 7 with --max-running 2 and --args-from lines: at most 2 of
// its jobs run at any moment, the others are pending with the reason in
// roam ps, and each starts as another ends, lowest index first, each
// with its line in its command and its index in its environment. The
// pending ones survive a restart of their home; the end summary counts
// the indices ok, failed by status and lost; a rerun runs only the failed
// ones, with their commands, as a new sweep naming the old; roam kill
// SWEEP ends the rest of another sweep at once, its pending jobs too.
func TestAgentsSweep(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 5, faults{}, "static")
		home := c.nodes[0].a
		lines := []string{"a", "b c", "d", "e", "f", "g", "h"}
		resp, err := home.launch.Run(sweepUser, api.RunRequest{Argv: []string{"/bin/echo", "--in={}.dat"}, Cwd: "/", Count: len(lines),
			SweepRequest: api.SweepRequest{Args: lines, MaxRunning: 2}})
		if err != nil {
			t.Fatal(err)
		}
		sw := resp.Sweep
		if !strings.HasPrefix(sw, "n1:") || len(resp.IDs) != 7 || resp.Nodes[2] != "" {
			t.Fatalf("run: %+v", resp)
		}
		for i, id := range resp.IDs {
			r := c.homeRec(id)
			if want := []string{"/bin/echo", "--in=" + lines[i] + ".dat"}; !slices.Equal(r.Argv, want) || r.Sweep.Index != i || r.Sweep.ID != sw {
				t.Fatalf("job %d: argv %q sweep %+v", i, r.Argv, r.Sweep)
			}
			if !slices.Contains(r.Env, "ROAM_INDEX="+strconv.Itoa(i)) || !slices.Contains(r.Env, "ROAM_SWEEP="+sw) {
				t.Fatalf("job %d's environment %q", i, r.Env)
			}
		}
		ps := home.PS(sweepUser, false)
		var pending *api.Job
		for i := range ps {
			if ps[i].State == api.StatePending {
				pending = &ps[i]
			}
		}
		if pending == nil || !strings.Contains(pending.PendingWhy, "--max-running 2") || pending.Sweep != sw {
			t.Fatalf("roam ps shows no pending job with its reason: %+v", ps)
		}
		live := func() int {
			n := 0
			for _, id := range resp.IDs {
				if r, _ := c.world.copies(id); len(r) > 0 {
					n++
				}
			}
			return n
		}
		exits := []int{0, 3, 0, 3, 143, 0, 0}
		for next := 0; next < 7; next++ {
			id := resp.IDs[next]
			c.waitFor(id+" runs", time.Minute, func() bool { r, _ := c.world.copies(id); return len(r) == 1 })
			if n := live(); n > 2 {
				t.Fatalf("%d jobs of the sweep run at once, --max-running 2", n)
			}
			if next == 3 {
				// Its home restarts with jobs pending: they start after.
				c.crash(0)
				c.start(0)
				home = c.nodes[0].a
			}
			c.exitJob(id, exits[next])
		}
		c.waitFor("the sweep ends", time.Minute, func() bool { return c.sweepOf(0, sw, sweepUser).Ended })
		s := c.sweepOf(1, sw, sweepUser)
		if want := "7 jobs: 4 ok, 3 failed (exit 3: 1,3; exit 143: 4), 0 lost"; s.Summary != want || !slices.Equal(s.Failed, []int{1, 3, 4}) {
			t.Fatalf("summary %q failed %v; want %q", s.Summary, s.Failed, want)
		}
		if _, err := c.nodes[0].a.control.Sweep(Caller{UID: 1002, GID: 1002}, sw); err == nil {
			t.Fatal("another user read the sweep")
		}

		re, err := home.launch.Run(sweepUser, api.RunRequest{SweepRequest: api.SweepRequest{Rerun: sw}})
		if err != nil {
			t.Fatal(err)
		}
		if len(re.IDs) != 3 || re.Sweep == sw {
			t.Fatalf("rerun: %+v", re)
		}
		for k, idx := range []int{1, 3, 4} {
			r := c.homeRec(re.IDs[k])
			if r.Sweep.Index != idx || r.Sweep.RerunOf != sw || !slices.Equal(r.Argv, []string{"/bin/echo", "--in=" + lines[idx] + ".dat"}) ||
				!slices.Contains(r.Env, "ROAM_INDEX="+strconv.Itoa(idx)) || !slices.Contains(r.Env, "ROAM_COUNT=7") {
				t.Fatalf("rerun's job %d: %+v", k, r)
			}
		}
		if _, err := home.launch.Run(Caller{UID: 1002, GID: 1002}, api.RunRequest{SweepRequest: api.SweepRequest{Rerun: sw}}); err == nil {
			t.Fatal("another user reran the sweep")
		}

		// roam kill SWEEP: its running jobs get the signal, its pending
		// ones end before they start.
		big, err := home.launch.Run(sweepUser, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 20, SweepRequest: api.SweepRequest{MaxRunning: 4}})
		if err != nil {
			t.Fatal(err)
		}
		c.waitFor("4 run", time.Minute, func() bool { return states(c.sweepOf(0, big.Sweep, sweepUser))[api.StateRunning] == 4 })
		if res, err := c.nodes[2].a.control.Kill(Caller{UID: 1002, GID: 1002}, api.KillRequest{IDs: []string{big.Sweep}, Signal: int(syscall.SIGTERM)}); err != nil ||
			len(res) != 1 || !strings.Contains(res[0].Error, "permission denied") {
			t.Fatalf("another user's kill: %+v %v", res, err)
		}
		// A signal that would not end a program by default (CONT) goes
		// to the running jobs only: the pending ones start as they would.
		if res, err := c.nodes[2].a.control.Kill(sweepUser, api.KillRequest{IDs: []string{big.Sweep}, Signal: int(syscall.SIGCONT)}); err != nil || len(res) != 4 {
			t.Fatalf("kill -s CONT of the sweep: %+v %v", res, err)
		}
		if n := states(c.sweepOf(0, big.Sweep, sweepUser)); n[api.StatePending] != 16 || n[api.StateRunning] != 4 {
			t.Fatalf("after kill -s CONT: %v", n)
		}
		res, err := c.nodes[2].a.control.Kill(sweepUser, api.KillRequest{IDs: []string{big.Sweep}, Signal: int(syscall.SIGTERM)})
		if err != nil || len(res) != 20 {
			t.Fatalf("kill: %+v %v", res, err)
		}
		for _, r := range res {
			if r.Error != "" {
				t.Fatalf("kill: %+v", r)
			}
		}
		c.waitFor("the killed sweep ends", time.Minute, func() bool { return c.sweepOf(0, big.Sweep, sweepUser).Ended })
		s = c.sweepOf(0, big.Sweep, sweepUser)
		if s.OK != 0 || len(s.Failed) != 20 {
			t.Fatalf("killed sweep: %s", s.Summary)
		}
		for _, id := range big.IDs {
			if r := c.homeRec(id); r.State != job.StateFinished || r.ExitCode == nil || *r.ExitCode != 128+int(syscall.SIGTERM) {
				t.Fatalf("%s after the kill: %s %v", id, r.State, r.ExitCode)
			}
		}
	})
}

// procCPU is the CPU time the fake kernel gave job id's copies, ended
// ones included.
func (c *cluster) procCPU(id string) float64 {
	w := c.world
	w.mu.Lock()
	defer w.mu.Unlock()
	w.account()
	var sum float64
	for _, p := range w.procs {
		if p.job == id {
			sum += p.cpu
		}
	}
	return sum
}

// An ended job keeps what it used: its CPU seconds on every node it ran
// on (here two, a migration between them), read from its last node's
// cgroup at its end and the earlier node's carried in the migration; the
// highest of the nodes' peak memory; its elapsed time; the nodes in
// order. roam ps shows them once it ended.
func TestAgentsAccountingSumsEveryNode(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 7, faults{}, "static")
		c.nodes[1].fn.peakMB, c.nodes[2].fn.peakMB = 300, 120
		id := c.run(0, 1, "n2")[0]
		c.waitFor(id+" runs", time.Minute, func() bool { r, _ := c.world.copies(id); return len(r) == 1 })
		time.Sleep(20 * time.Second)
		if m, err := c.nodes[0].a.out.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: "n3"}); err != nil || !m.OK {
			t.Fatalf("migrate: %+v %v", m, err)
		}
		time.Sleep(30 * time.Second)
		c.exitJob(id, 0)
		c.waitFor(id+" ends", time.Minute, func() bool { return c.homeRec(id).Over() })
		want := c.procCPU(id)
		r := c.homeRec(id)
		if want < 40 || r.Used.CPUSeconds < want*0.95 || r.Used.CPUSeconds > want*1.05 {
			t.Fatalf("the record keeps %.2f CPU seconds, the fake kernel gave %.2f", r.Used.CPUSeconds, want)
		}
		if r.Used.PeakMB != 300 {
			t.Fatalf("peak %.0f MiB, want n2's 300", r.Used.PeakMB)
		}
		var row *api.Job
		for _, j := range c.nodes[1].a.PS(Caller{}, true) {
			if j.ID == id {
				row = &j
			}
		}
		if row == nil || row.CPUSeconds != r.Used.CPUSeconds || row.PeakMB != 300 || !slices.Equal(row.Nodes, []string{"n2", "n3"}) ||
			row.ElapsedSeconds < 50 || row.ExitCode == nil || *row.ExitCode != 0 {
			t.Fatalf("roam ps: %+v", row)
		}
	})
}

// userDir is a directory of the test's own, owned by c (mode 0700).
func userDir(t *testing.T, c Caller) string {
	// Not under /tmp: a job's /tmp is its own, and a working directory
	// there is refused.
	dir, err := os.MkdirTemp("/run", "roam-user-")
	if err != nil || os.Chown(dir, int(c.UID), int(c.GID)) != nil {
		t.Fatalf("user dir: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// Each index's stdout and stderr go to the files its --output and
// --error patterns name, written at the home as the job's user: made
// by them, holding the output the job wrote, cut to it at the end (an
// old longer file's tail gone), empty for a job that wrote nothing. A
// symlink planted at an index's output path is not followed: nothing is
// written through it, its output stays in roam logs, and roam ps says
// why.
func TestAgentsSweepOutputFiles(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 9, faults{}, "static")
		dir := userDir(t, sweepUser)
		victim := filepath.Join(t.TempDir(), "victim")
		if err := os.WriteFile(victim, []byte("root's\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(victim, filepath.Join(dir, "out.1")); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "out.0"), []byte(strings.Repeat("stale\n", 20)), 0o600); err != nil || os.Chown(filepath.Join(dir, "out.0"), 1001, 1001) != nil {
			t.Fatal(err)
		}
		resp, err := c.nodes[0].a.launch.Run(sweepUser, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: dir, Count: 3, On: "n2",
			SweepRequest: api.SweepRequest{Output: "out.%a", Error: dir + "/%A.err.%j"}})
		if err != nil {
			t.Fatal(err)
		}
		for i, id := range resp.IDs[:2] {
			c.say(1, id, fmt.Sprintf("line %d of %s", i, id))
		}
		for _, id := range resp.IDs {
			c.waitFor(id+" runs", time.Minute, func() bool { r, _ := c.world.copies(id); return len(r) == 1 })
			c.exitJob(id, 0)
		}
		c.waitFor("the sweep ends", time.Minute, func() bool { return c.sweepOf(0, resp.Sweep, sweepUser).Ended })
		// The files are written beside the relay, on the home's writer.
		c.waitFor("the files written", time.Minute, func() bool { return c.nodes[0].a.files.Pending() == 0 })
		b, err := os.ReadFile(filepath.Join(dir, "out.0"))
		if want := "line 0 of " + resp.IDs[0] + "\n"; err != nil || string(b) != want {
			t.Fatalf("out.0 holds %q, %v; want %q", b, err, want)
		}
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(dir, "out.2"), &st); err != nil || st.Uid != 1001 || st.Size != 0 {
			t.Fatalf("out.2 of a job that wrote nothing: %v uid %d size %d", err, st.Uid, st.Size)
		}
		errFile := filepath.Join(dir, resp.Sweep+".err."+resp.IDs[2])
		if err := syscall.Stat(errFile, &st); err != nil || st.Uid != 1001 {
			t.Fatalf("%s: %v uid %d", errFile, err, st.Uid)
		}
		if b, _ := os.ReadFile(victim); string(b) != "root's\n" {
			t.Fatalf("written through the symlink: the victim holds %q", b)
		}
		if out := c.homeOutput(resp.IDs[1]); !strings.Contains(out, "line 1") {
			t.Fatalf("index 1's output is not in its spool: %q", out)
		}
		for _, j := range c.nodes[1].a.PS(sweepUser, false) {
			switch {
			case j.ID == resp.IDs[1] && !strings.Contains(j.FileError, "symlink"):
				t.Fatalf("roam ps of index 1: file error %q", j.FileError)
			case j.ID == resp.IDs[0] && (j.OutputFile != filepath.Join(dir, "out.0") || j.ErrorFile == "" || j.FileError != ""):
				t.Fatalf("roam ps of index 0: %+v", j.JobSweep)
			}
		}
	})
}

// checkSweep asks for a sweep of A's, whose jobs' command line holds
// A's private path: A and root see its jobs, B is refused.
func (x *authzEnv) checkSweep(who authzCaller, _ *authzJob, want authzWant) string {
	if x.sweep == "" {
		req, _ := json.Marshal(api.RunRequest{Argv: []string{"/bin/true", "--in=" + x.jobs[0].arg}, Env: []string{"T=" + x.jobs[0].env}, Cwd: "/", Count: 2,
			SweepRequest: api.SweepRequest{MaxRunning: 1}})
		code, b := x.ask(0, authzA, http.MethodPost, api.PathRun, string(req))
		var resp api.RunResponse
		if code != http.StatusOK || json.Unmarshal(b, &resp) != nil || resp.Sweep == "" {
			return fmt.Sprintf("A's sweep: %d %s", code, b)
		}
		x.sweep, x.answers = resp.Sweep, nil
	}
	code, b := x.ask(0, who, http.MethodGet, api.Fill(api.PathSweep, x.sweep), "")
	var s api.Sweep
	return served(want, code, b, &s, func() string {
		if s.ID != x.sweep || len(s.Jobs) != 2 || s.UID != 1001 {
			return fmt.Sprintf("sweep %+v", s)
		}
		return ""
	})
}

// A home that restarts with jobs still starting (it died between
// recording a start and having its node's answer) marks them lost: one
// its node runs is running again at the node's next news, one that never
// started stays lost, its sweep ended, never starting for ever.
func TestAgentsHomeLosesUnconfirmedStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 13, faults{}, "static")
		ran := c.run(0, 1, "n2")[0]
		c.waitFor(ran+" runs", time.Minute, func() bool { return c.homeRec(ran).State == job.StateRunning })
		c.crash(0)
		st, err := job.Open(filepath.Join(c.nodes[0].cfg.StateDir, "state.db"))
		if err != nil {
			t.Fatal(err)
		}
		r := c.homeRecFrom(st, ran)
		r.State = job.StateStarting
		never := r
		never.ID, never.Node, never.Sweep = "n1.900", "n3", job.SweepPart{ID: "n1:899", Count: 1}
		if err := st.PutRecords(r, never); err != nil {
			t.Fatal(err)
		}
		st.Close()
		c.start(0)
		if got := c.homeRec(never.ID); got.State != job.StateLost {
			t.Fatalf("a start never confirmed: %s", got.State)
		}
		c.waitFor(ran+" running again", time.Minute, func() bool { return c.homeRec(ran).State == job.StateRunning })
		if s := c.sweepOf(0, "n1:899", Caller{}); !s.Ended || len(s.Lost) != 1 {
			t.Fatalf("its sweep: %+v", s)
		}
	})
}

// homeRecFrom is job id's record in a store.
func (c *cluster) homeRecFrom(st *job.Store, id string) job.Record {
	c.t.Helper()
	recs, err := st.Records()
	if err != nil {
		c.t.Fatal(err)
	}
	for _, r := range recs {
		if r.ID == id {
			return r
		}
	}
	c.t.Fatalf("no record of %s", id)
	return job.Record{}
}
