package agent

// A home whose state disk is short: the output of its jobs waits on
// their nodes, and their ends are recorded with what the home has.

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/api"
	"roam/internal/job"
)

// TestAgentsEndJobsWhoseHomeIsShort: a home whose state disk is short of
// half its reserve (limits.HomeOutputShort) writes none of its jobs'
// output there, yet a job that ended, killed at a limit or by itself,
// reaches finished at its home with its status and reason, the output its
// node dropped said so, and its node lets its copy go; a running job's
// output waits on its node and reaches the home once the disk has room.
// (A home whose disk the nodes' waiting copies had filled recorded no
// end: the e2e flood's jobs stayed running at the home, none alive.)
func TestAgentsEndJobsWhoseHomeIsShort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const reserve = 64 << 20
		c := newCluster(t, 2, 59, faults{}, "static", func(cfg *Config) {
			cfg.Limits.DiskReserveBytes, cfg.Limits.OutputBytes = reserve, 1<<20
		})
		start := func(who Caller, n int) []string { return c.runAs(who, n, "n2") }
		a, b := Caller{UID: 1001, GID: 1001}, Caller{UID: 1002, GID: 1002}
		flood, other := start(a, 2), start(b, 1)[0]
		c.waitRunning(append(flood, other)...)
		c.nodes[0].free.Store(reserve / 4)
		c.appendOutput(1, flood[0], []byte(strings.Repeat("y", 1100<<10-1)+"\n")) // past its output_bytes
		c.appendOutput(1, flood[1], []byte("some\n"))
		c.endJob(1, flood[1])
		c.appendOutput(1, other, []byte("small\n"))
		c.waitFor("ended at home", time.Minute, func() bool {
			return c.homeRec(flood[0]).State == job.StateFinished && c.homeRec(flood[1]).State == job.StateFinished
		})
		for i, id := range flood {
			r := c.homeRec(id)
			if r.ExitCode == nil || *r.ExitCode == 0 || !strings.Contains(r.OutputCut, "limits.disk_reserve_bytes") || c.homeOutput(id) != "" {
				t.Fatalf("job %s ended %v, %q, output cut %q, %d bytes at home", id, r.ExitCode, r.EndReason, r.OutputCut, len(c.homeOutput(id)))
			}
			if why := []string{"limits.output_bytes", ""}[i]; why == "" && r.EndReason != "" || !strings.Contains(r.EndReason, why) {
				t.Fatalf("job %s ended for %q, not %q", id, r.EndReason, why)
			}
		}
		c.waitFor("the node lets their copies go", time.Minute, func() bool {
			_, here0 := c.nodes[1].a.jobs.LocalRec(flood[0])
			_, here1 := c.nodes[1].a.jobs.LocalRec(flood[1])
			return !here0 && !here1
		})
		if r := c.homeRec(other); r.State != job.StateRunning || c.homeOutput(other) != "" {
			t.Fatalf("the running job: %s, %q at home", r.State, c.homeOutput(other))
		}
		c.nodes[0].free.Store(1 << 40)
		c.waitFor("the running job's output", time.Minute, func() bool { return c.homeOutput(other) == "small\n" })
		c.endJob(1, other)
		c.waitFor("its end", time.Minute, func() bool { return c.homeRec(other).State == job.StateFinished })
		if r := c.homeRec(other); r.OutputCut != "" || c.homeOutput(other) != "small\n" {
			t.Fatalf("a job whose home had room: output cut %q, %q at home", r.OutputCut, c.homeOutput(other))
		}
		t.Logf("%s: %s; %s", flood[0], c.homeRec(flood[0]).EndReason, c.homeRec(flood[0]).OutputCut)
	})
}

// TestAgentsCutAtAShortHomeWhatItLacks: a job whose home took part of
// both its streams, then went short, has its end recorded with those
// parts and its record saying how many bytes it lacks; a job whose home
// was short once and has room again when it ends loses nothing, though
// its node had been told to hold its output back; nor does a home with
// room for an end alone but not for a piece of its output go on asking
// for the rest.
func TestAgentsCutAtAShortHomeWhatItLacks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const reserve = 64 << 20
		c := newCluster(t, 2, 61, faults{}, "static", func(cfg *Config) { cfg.Limits.DiskReserveBytes = reserve })
		ids := c.runAs(Caller{UID: 1001, GID: 1001}, 3, "n2")
		c.waitRunning(ids...)
		home := c.nodes[0]
		home.free.Store(1 << 40)
		cut, back, edge := ids[0], ids[1], ids[2]
		c.appendOutput(1, cut, []byte("first out\n"))
		c.appendStream(1, cut, "stderr", []byte("first err\n"))
		c.waitFor("the first parts at home", time.Minute, func() bool {
			return c.homeOutput(cut) == "first out\n" && c.homeStream(cut, "stderr") == "first err\n"
		})
		home.free.Store(reserve / 4)
		c.appendOutput(1, cut, []byte("second\n"))
		c.appendStream(1, cut, "stderr", []byte("e2\n"))
		c.endJob(1, cut)
		c.waitFor("its end", time.Minute, func() bool { return c.homeRec(cut).State == job.StateFinished })
		r := c.homeRec(cut)
		if c.homeOutput(cut) != "first out\n" || c.homeStream(cut, "stderr") != "first err\n" || !strings.Contains(r.OutputCut, "last "+api.Bytes(10)+" ") {
			t.Fatalf("at home: %q, %q, output cut %q", c.homeOutput(cut), c.homeStream(cut, "stderr"), r.OutputCut)
		}
		// Short once: the node holds back's output for a while (a second
		// of the fake clock: pushes every 50 ms answered "full").
		c.appendOutput(1, back, []byte("a\n"))
		time.Sleep(200 * time.Millisecond)
		if c.homeOutput(back) != "" {
			t.Fatalf("a short home wrote %q", c.homeOutput(back))
		}
		home.free.Store(1 << 40)
		c.appendOutput(1, back, []byte("b\n"))
		c.endJob(1, back)
		c.waitFor("its end", time.Minute, func() bool { return c.homeRec(back).State == job.StateFinished })
		if r := c.homeRec(back); c.homeOutput(back) != "a\nb\n" || r.OutputCut != "" {
			t.Fatalf("a home with room again: %q at home, output cut %q", c.homeOutput(back), r.OutputCut)
		}
		// At the edge: room for an end alone, not for a piece of output.
		home.free.Store(reserve/2 + 100<<10)
		c.appendOutput(1, edge, []byte(strings.Repeat("y", 1<<20-1)+"\n"))
		c.endJob(1, edge)
		c.waitFor("the end at the edge", time.Minute, func() bool { return c.homeRec(edge).State == job.StateFinished })
		if r := c.homeRec(edge); !strings.Contains(r.OutputCut, "last "+api.Bytes(1<<20)+" ") {
			t.Fatalf("at the edge: output cut %q", r.OutputCut)
		}
	})
}

// appendStream writes data to job id's stream on node i, as the job
// would.
func (c *cluster) appendStream(i int, id, stream string, data []byte) {
	f, err := os.OpenFile(filepath.Join(c.nodes[i].fn.SpoolDir(id), stream), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(data); err != nil {
		c.t.Fatal(err)
	}
}

// homeStream is what job id's home has of its stream.
func (c *cluster) homeStream(id, stream string) string {
	b, _ := os.ReadFile(filepath.Join(c.nodes[nodeIndex(id)].a.spools.Dir(id), stream))
	return string(b)
}
