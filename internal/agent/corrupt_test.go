package agent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	bolt "go.etcd.io/bbolt"

	"roam/internal/agent/jobtable"
	"roam/internal/job"
)

// A corrupt record in the job table (here: garbage in place of one of
// three home records, and of one local record) does not keep the agent
// from starting: it reports the record, sets it aside, and the other jobs
// are intact and keep running.
func TestAgentStartsWithACorruptRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 17, faults{}, "static")
		ids := c.run(0, 3, "n2")
		local := c.run(0, 1, "n1")[0]
		c.waitFor("running", time.Minute, func() bool {
			for _, id := range append(ids, local) {
				if c.homeRec(id).State != job.StateRunning {
					return false
				}
			}
			return true
		})
		c.crash(0)
		db, err := bolt.Open(filepath.Join(c.nodes[0].cfg.StateDir, "state.db"), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = db.Update(func(tx *bolt.Tx) error {
			if err := tx.Bucket([]byte("home")).Put([]byte(ids[1]), []byte("{\x00not json")); err != nil {
				return err
			}
			return tx.Bucket([]byte("local")).Put([]byte(local), []byte(`{"id":"someone.else.1"}`))
		})
		db.Close()
		if err != nil {
			t.Fatal(err)
		}
		c.start(0)
		home := c.nodes[0].a
		var reported []string
		for _, e := range home.events.Since(time.Time{}) {
			if e.Kind == "corrupt" {
				reported = append(reported, e.Job)
			}
		}
		if strings.Join(reported, ",") != ids[1]+","+local && strings.Join(reported, ",") != local+","+ids[1] {
			t.Fatalf("reported corrupt: %v, want %s and %s", reported, ids[1], local)
		}
		for _, id := range []string{ids[0], ids[2]} {
			if r := c.homeRec(id); r.State != job.StateRunning || r.Node != "n2" {
				t.Fatalf("%s after the restart: %+v", id, r)
			}
		}
		if r := c.homeRec(ids[1]); r.ID != "" {
			t.Fatalf("the corrupt record was read: %+v", r)
		}
		// Set aside, not lost: its bytes are kept, and a second start does
		// not report it again.
		c.crash(0)
		db, err = bolt.Open(filepath.Join(c.nodes[0].cfg.StateDir, "state.db"), 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		var kept string
		_ = db.View(func(tx *bolt.Tx) error {
			if b := tx.Bucket([]byte("corrupt")); b != nil {
				kept = string(b.Get([]byte("home/" + ids[1])))
			}
			return nil
		})
		db.Close()
		if kept != "{\x00not json" {
			t.Fatalf("set aside: %q", kept)
		}
		c.start(0)
		for _, e := range c.nodes[0].a.events.Since(time.Time{}) {
			if e.Kind == "corrupt" {
				t.Fatalf("reported again: %+v", e)
			}
		}
		if r := c.homeRec(ids[2]); r.State != job.StateRunning {
			t.Fatalf("%s after the second restart: %+v", ids[2], r)
		}
	})
}

// A home whose job table cannot be written acknowledges nothing: the
// node that ran a job keeps the job's output and exit status in its spool
// (and sends them again) instead of deleting them on an acknowledgement
// that was never made durable.
func TestAgentsAckOnlyWhatIsDurable(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 25, faults{}, "static")
		id := c.run(0, 1, "n2")[0]
		c.waitFor("running", time.Minute, func() bool { return c.homeRec(id).State == job.StateRunning })
		home, n2 := c.nodes[0].a, c.nodes[1]
		if err := home.store.Close(); err != nil { // every write now fails
			t.Fatal(err)
		}
		c.say(1, id, "last words")
		c.endJob(1, id)
		time.Sleep(3 * jobtable.AliveEvery)
		rec, here := n2.a.jobs.LocalRec(id)
		if !here {
			t.Fatal("the node forgot the job on an acknowledgement the home could not keep")
		}
		if b, err := os.ReadFile(filepath.Join(rec.Dir, "stdout")); err != nil || string(b) != "last words\n" {
			t.Fatalf("the node's spool: %q %v", b, err)
		}
		if r := c.homeRec(id); r.State != job.StateRunning {
			t.Fatalf("the home's memory says %s without its table", r.State)
		}
	})
}
