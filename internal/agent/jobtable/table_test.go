package jobtable

import (
	"path/filepath"
	"testing"
	"time"

	"roam/internal/agent/relay"
	"roam/internal/agent/spool"
	"roam/internal/job"
)

// MarkStarted takes each job's start from its node's answer: a starting
// job turns running, one whose end came before the answer (a fast job)
// stays finished with that start too, and a record whose start changed
// since the start was asked for keeps its own.
func TestMarkStarted(t *testing.T) {
	j := testTable(t)
	placed := time.Now()
	var recs []job.Record
	for _, id := range []string{"1.1", "1.2", "1.3"} {
		recs = append(recs, job.Record{ID: id, Home: "1", Node: "2", State: job.StateStarting, Started: placed})
	}
	if taken, err := j.AddHome(recs, func(uint32, int64, int64) error { return nil }); err != nil || taken != "" {
		t.Fatal(taken, err)
	}
	code := 0
	j.home["1.2"].State, j.home["1.2"].ExitCode, j.home["1.2"].Ended = job.StateFinished, &code, placed.Add(time.Second)
	restarted := placed.Add(time.Hour)
	j.home["1.3"].Started = restarted
	ran := map[string]time.Time{"1.1": placed.Add(10 * time.Millisecond), "1.2": placed.Add(20 * time.Millisecond), "1.3": placed.Add(30 * time.Millisecond)}
	if err := j.MarkStarted(recs, ran); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]struct {
		state   string
		started time.Time
	}{"1.1": {job.StateRunning, ran["1.1"]}, "1.2": {job.StateFinished, ran["1.2"]}, "1.3": {job.StateRunning, restarted}} {
		for _, r := range []job.Record{*j.home[id], stored(t, j.store, id)} {
			if r.State != want.state || !r.Started.Equal(want.started) {
				t.Errorf("job %s: %s, started %v after its placing; want %s, %v", id, r.State, r.Started.Sub(placed), want.state, want.started.Sub(placed))
			}
		}
	}
}

func stored(t *testing.T, s *job.Store, id string) job.Record {
	t.Helper()
	recs, err := s.Records()
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.ID == id {
			return r
		}
	}
	t.Fatalf("no record %s in the store", id)
	return job.Record{}
}

// News of a job that reached a node that is not its home (a stale home
// address, say) is not acknowledged: the job's node keeps it and sends it
// again, to its home. An acknowledgement of its end made its node forget
// a job whose process ran on. Its home acknowledges its own forgotten
// job as gone, so that its node ends it.
func TestNewsOfAnotherHomesJobIsNotAcknowledged(t *testing.T) {
	j := testTable(t)
	ups := []relay.Update{{ID: "9.5", Node: "2", Out: []byte("x")}, {ID: "1.7", Node: "2"}}
	known, stale := j.Known(ups)
	taken, err := j.TakeNews(ups, make([][2]int64, len(ups)), known, stale, "1", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := taken.Acks["9.5"]; ok {
		t.Errorf("node 1 acknowledged news of node 9's job: %+v", a)
	}
	if a := taken.Acks["1.7"]; !a.Done || !a.Gone {
		t.Errorf("node 1's own forgotten job: %+v, want done and gone", a)
	}
}

// testTable is a job table on a store and spools of the test's own.
func testTable(t *testing.T) *Table {
	t.Helper()
	dir := t.TempDir()
	store, err := job.Open(filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return New(store, spool.New(filepath.Join(dir, "spool"), 2), 1)
}
