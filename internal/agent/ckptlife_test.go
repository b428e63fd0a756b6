package agent

import (
	"bytes"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/job"
	"roam/internal/migrate"
)

// A checkpoint file's life, as its user may try to stretch it: uploads
// judged by their head and checked chunk by chunk, kept files swept once
// their job is gone, restarts refused past the file's expiry and of jobs
// root or a limit ended (issue 44).

// countingReader counts the bytes read from r: what an upload made the
// agent read before it answered.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// junk is an endless reader of bytes that are no checkpoint.
type junk struct{}

func (junk) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(i*13 + 5)
	}
	return len(p), nil
}

// checkpointOf is the sealed file `roam checkpoint` hands caller for job id.
func checkpointOf(t *testing.T, c *cluster, caller Caller, id string) []byte {
	t.Helper()
	w := httptest.NewRecorder()
	if err := c.nodes[0].a.checkpoints.Checkpoint(caller, api.CheckpointRequest{ID: id}, w); err != nil || w.Code != 200 {
		t.Fatalf("checkpoint of %s: %v, status %d", id, err, w.Code)
	}
	return w.Body.Bytes()
}

// restart is `roam restart` of b by caller at n1, and the bytes of the
// upload the agent read.
func restart(c *cluster, caller Caller, r io.Reader, length int64) (api.RestartResponse, int64, error) {
	cr := &countingReader{r: r}
	res, err := c.nodes[0].a.checkpoints.Restart(caller, nil, cr, length)
	return res, cr.n, err
}

// A 1 GiB `roam restart` upload of garbage is refused within its first
// MiB, and so is one that begins with the head of the user's own
// checkpoint (which they have) and goes on with garbage: the head is
// judged before the body is taken, each chunk as it comes. Nothing of
// them is left on the node's disk, nor in the user's budget.
func TestAgentsRefuseAGarbageRestartInItsFirstMiB(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 44, faults{}, "static")
		owner := Caller{UID: 70001, GID: 70001}
		id := runOneOn(t, c, owner, "n2")
		file := checkpointOf(t, c, owner, id)
		head := bytes.Index(file, []byte("\n"))
		head += bytes.Index(file[head+1:], []byte("\n")) + 2 + migrate.SealSize
		for name, tc := range map[string]struct {
			r      io.Reader
			length int64
			want   string
		}{
			"1 GiB of garbage":                 {junk{}, 1 << 30, "not a roam checkpoint"},
			"a real head and 1 GiB garbage":    {io.MultiReader(bytes.NewReader(file[:head]), junk{}), 1 << 30, "its head says"},
			"a real head, its length, garbage": {io.MultiReader(bytes.NewReader(file[:head]), junk{}), int64(len(file)), "chunk 1: its seal does not match"},
		} {
			_, n, err := restart(c, owner, tc.r, tc.length)
			if !errors.Is(err, peer.ErrBadRequest) || !strings.Contains(err.Error(), tc.want) || n > 1<<20 {
				t.Errorf("%s: %v after %d bytes read; want refused (%q) within the first MiB", name, err, n, tc.want)
			}
			t.Logf("%s: refused after %d bytes read", name, n)
		}
		a := c.nodes[0].a
		if n, b := a.keeper.InFlight(owner.UID); n != 0 || b != 0 {
			t.Errorf("in flight after the refusals: %d files, %d bytes", n, b)
		}
		if left, _ := os.ReadDir(a.keeper.Dir()); len(left) > 1 || len(left) == 1 && left[0].Name() != "sealed" {
			t.Errorf("left on n1's disk: %v", left)
		}
	})
}

// A restart of a job that root killed is refused, and so is one past its
// file's expiry (limits.checkpoint_expiry); a job its owner killed
// restarts, until its file expired.
func TestAgentsRefuseToReviveWhatRootOrTimeEnded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 45, faults{}, "static", func(cfg *Config) { cfg.Limits.CheckpointExpiry = 10 * time.Minute })
		owner := Caller{UID: 70001, GID: 70001}
		kill := func(who Caller, id string) {
			t.Helper()
			res, err := c.nodes[0].a.control.Kill(who, api.KillRequest{IDs: []string{id}, Signal: 9})
			if err != nil || len(res) != 1 || res[0].Error != "" {
				t.Fatalf("kill of %s: %+v %v", id, res, err)
			}
			c.waitFor(id+" ended", time.Minute, func() bool { return c.homeRec(id).State == job.StateFinished })
		}
		rooted := runOneOn(t, c, owner, "n2")
		mine := runOneOn(t, c, owner, "n2")
		rootedFile, mineFile := checkpointOf(t, c, owner, rooted), checkpointOf(t, c, owner, mine)
		kill(Caller{}, rooted)
		if r := c.homeRec(rooted); !strings.Contains(r.EndReason, "root's signal 9") {
			t.Fatalf("root's kill: end reason %q", r.EndReason)
		}
		_, _, err := restart(c, owner, bytes.NewReader(rootedFile), int64(len(rootedFile)))
		if !errors.Is(err, peer.ErrPermission) || !strings.Contains(err.Error(), "ended by root or a limit") {
			t.Fatalf("restart of a job root killed: %v", err)
		}
		if r := c.homeRec(rooted); r.Inc != 0 || r.State != job.StateFinished {
			t.Fatalf("after the refusal: %s, incarnation %d", r.State, r.Inc)
		}
		kill(owner, mine)
		res, _, err := restart(c, owner, bytes.NewReader(mineFile), int64(len(mineFile)))
		if err != nil || res.ID != mine || res.Inc != 1 {
			t.Fatalf("restart of a job its owner killed: %+v %v", res, err)
		}
		kill(owner, mine)
		time.Sleep(10*time.Minute + time.Second)
		_, n, err := restart(c, owner, bytes.NewReader(mineFile), int64(len(mineFile)))
		if !errors.Is(err, peer.ErrBadRequest) || !strings.Contains(err.Error(), "limits.checkpoint_expiry") || n > 64<<10 {
			t.Fatalf("restart past the file's expiry: %v after %d bytes", err, n)
		}
		if r := c.homeRec(mine); r.Inc != 1 || r.State != job.StateFinished {
			t.Fatalf("after the refusal: %s, incarnation %d", r.State, r.Inc)
		}
	})
}

// A kept checkpoint whose drop was lost (here, a late periodic file kept
// after its job's drop) is removed by its keeper within one sweep period
// (limits.checkpoint_sweep) of its job having ended, or having been
// purged; a running job's stays.
func TestKeepersSweepTheCheckpointsOfJobsGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const sweep = 20 * time.Second
		c := newCluster(t, 2, 46, faults{}, "static", func(cfg *Config) { cfg.Limits.CheckpointSweep = sweep })
		owner := Caller{UID: 70001, GID: 70001}
		home := c.nodes[0].a
		resp, err := home.launch.Run(owner, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: 3, On: "n2", CheckpointEvery: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ids := resp.IDs
		c.waitFor("a checkpoint of each kept at the home", time.Minute, func() bool {
			for _, id := range ids {
				if home.keeper.Stored(id) == "" {
					return false
				}
			}
			return true
		})
		late := map[string][]byte{}
		for _, id := range ids[:2] {
			b, err := os.ReadFile(home.keeper.Stored(id))
			if err != nil {
				t.Fatal(err)
			}
			late[id] = b
			c.exitJob(id, 0)
		}
		c.waitFor("the ended jobs' checkpoints dropped", time.Minute, func() bool {
			return home.keeper.Stored(ids[0]) == "" && home.keeper.Stored(ids[1]) == ""
		})
		if _, err := home.news.Purge(owner, api.PurgeRequest{}); err != nil {
			t.Fatal(err)
		}
		if r, err := home.jobs.HomeRecord(ids[1]); err == nil {
			t.Fatalf("%s not purged: %s", ids[1], r.State)
		}
		// Its drop lost: a late file of each comes to be kept after it.
		for id, b := range late {
			f, release, err := home.keeper.Take(bytes.NewReader(b), int64(len(b)), peer.NewMID(), func(migrate.Binding) error { return nil })
			if err != nil {
				t.Fatal(err)
			}
			err = home.keeper.Keep(id, f)
			release()
			if err != nil || home.keeper.Stored(id) == "" {
				t.Fatalf("keep of %s's late file: %v", id, err)
			}
		}
		kept := time.Now()
		c.waitFor("the late files swept", 2*sweep, func() bool {
			return home.keeper.Stored(ids[0]) == "" && home.keeper.Stored(ids[1]) == ""
		})
		if took := time.Since(kept); took > sweep {
			t.Fatalf("swept %v after they were kept, more than one sweep (%v)", took, sweep)
		}
		time.Sleep(2 * sweep)
		if home.keeper.Stored(ids[2]) == "" {
			t.Fatal("the running job's checkpoint was swept")
		}
		if got := home.keeper.KeptBytes(owner.UID); got == 0 {
			t.Fatal("the running job's checkpoint is not counted in its owner's kept bytes")
		}
	})
}
