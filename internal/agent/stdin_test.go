package agent

import (
	"runtime"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/api"
	"roam/internal/job"
)

// 1,000 stdin posts of 64 KiB to a job that never reads its stdin, from
// its home on another node: the job's pipe takes what it has room for and
// every post returns at once, with what was taken; the agents hold no
// buffer and no goroutine for the rest.
func TestAgentsStdinOfAJobThatNeverReads(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 18, faults{}, "static")
		home := c.nodes[0].a
		resp, err := home.launch.Run(Caller{UID: 1001, GID: 1001}, api.RunRequest{Argv: []string{"/bin/cat"}, Cwd: "/", Count: 1, On: "n2", Stdin: true})
		if err != nil {
			t.Fatal(err)
		}
		id := resp.IDs[0]
		c.waitFor("running", time.Minute, func() bool { return c.homeRec(id).State == job.StateRunning })

		heap := func() uint64 {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			return m.HeapAlloc
		}
		g0, h0 := runtime.NumGoroutine(), heap()
		chunk := make([]byte, 64<<10)
		total := 0
		for i := 0; i < 1000; i++ {
			res, err := home.news.Stdin(Caller{UID: 1001, GID: 1001}, id, chunk, false)
			if err != nil {
				t.Fatalf("post %d: %v", i, err)
			}
			total += res.Accepted
		}
		g1, h1 := runtime.NumGoroutine(), heap()
		// A pipe holds 64 KiB to 1 MiB (pipe-max-size); the rest was refused.
		if total == 0 || total > 1<<20 {
			t.Fatalf("the job's pipe took %d bytes of 64 MiB sent", total)
		}
		if g1 > g0+5 {
			t.Fatalf("goroutines %d -> %d", g0, g1)
		}
		if h1 > h0+8<<20 {
			t.Fatalf("heap %d MiB -> %d MiB", h0>>20, h1>>20)
		}
		// Someone else may not write to it.
		if _, err := home.news.Stdin(Caller{UID: 1002, GID: 1002}, id, chunk, false); err == nil {
			t.Fatal("user 1002 wrote to the stdin of user 1001's job")
		}
		t.Logf("the pipe took %d bytes; goroutines %d -> %d; heap %d -> %d KiB", total, g0, g1, h0>>10, h1>>10)
	})
}
