package bench

import (
	"errors"
	"testing"
	"time"

	"roam/internal/api"
)

// CheckLines: one copy counts up by one; a restart falls back once; two
// copies interleave (a rise by more than one); a fall without a restart
// is a copy that ran unrestarted.
func TestCheckLines(t *testing.T) {
	for _, c := range []struct {
		file       string
		restarts   int
		last       int
		interleave bool
		bad        bool
	}{
		{"", 0, 0, false, false},
		{"1\n2\n3\n", 0, 3, false, false},
		{"1\n2\n3\n4", 0, 3, false, false}, // the last write cut
		{"1\n2\n3\n2\n3\n4\n", 1, 4, false, false},
		{"1\n2\n3\n2\n3\n4\n", 0, 3, false, true},
		{"1\n2\n3\n2\n4\n", 1, 2, true, true},
		{"1\n2\n3\n1\n2\n1\n2\n", 2, 2, false, false},
		{"2\n3\n", 0, 0, true, true},
		{"1\nx\n", 0, 1, false, true},
	} {
		last, err := CheckLines([]byte(c.file), c.restarts)
		if last != c.last || (err != nil) != c.bad || errors.Is(err, ErrInterleave) != c.interleave {
			t.Errorf("%q with %d restarts: %d, %v; want %d, bad %v, interleave %v", c.file, c.restarts, last, err, c.last, c.bad, c.interleave)
		}
	}
}

// fencedUnkept: a job is fenced once a checkpoint of it was taken or it
// was restarted from its owner's file, and its home can restart it only
// from a periodic checkpoint kept since that restart.
func TestFencedUnkept(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	kept := func(s int) api.Checkpoint { return api.Checkpoint{At: at(s), OK: true, StoredOn: "2"} }
	owners := func(s int) api.Checkpoint { return api.Checkpoint{At: at(s), OK: true} }
	byUser := func(s int) api.Restart { return api.Restart{At: at(s), Why: "roam restart"} }
	byHome := func(s int) api.Restart { return api.Restart{At: at(s), Why: "node 3 was declared dead"} }
	for _, c := range []struct {
		name string
		job  api.Job
		want bool
	}{
		{"never checkpointed", api.Job{}, false},
		{"a failed checkpoint", api.Job{Checkpoints: []api.Checkpoint{{At: at(1), StoredOn: "2"}}}, false},
		{"kept", api.Job{Checkpoints: []api.Checkpoint{kept(1)}}, false},
		{"its owner's file only", api.Job{Checkpoints: []api.Checkpoint{owners(1)}}, true},
		{"its owner's file, then one kept", api.Job{Checkpoints: []api.Checkpoint{owners(1), kept(2)}}, false},
		{"restarted by its owner, kept before", api.Job{Checkpoints: []api.Checkpoint{kept(1), owners(2)}, Restarts: []api.Restart{byUser(3)}}, true},
		{"restarted by its owner, kept since", api.Job{Checkpoints: []api.Checkpoint{kept(1), kept(4)}, Restarts: []api.Restart{byUser(3)}}, false},
		{"restarted by its home from one kept", api.Job{Checkpoints: []api.Checkpoint{kept(1)}, Restarts: []api.Restart{byHome(3)}}, false},
	} {
		if got := fencedUnkept(c.job); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
