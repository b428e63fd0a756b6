package bench

import (
	"errors"
	"testing"
	"time"

	"roam/internal/api"
)

// CheckLines: one copy counts up by one; a restart falls back once, to
// where its point allows (anywhere for a home's restart, the owner's
// file's count for a roam restart); two copies interleave (a rise by
// more than one); a fall no restart allows is a copy that ran
// unrestarted.
func TestCheckLines(t *testing.T) {
	home := RestartPoint{}
	owner := func(lo, hi int) RestartPoint { return RestartPoint{Owner: true, Lo: lo, Hi: hi} }
	for _, c := range []struct {
		file       string
		points     []RestartPoint
		last       int
		interleave bool
		bad        bool
	}{
		{"", nil, 0, false, false},
		{"1\n2\n3\n", nil, 3, false, false},
		{"1\n2\n3\n4", nil, 3, false, false}, // the last write cut
		{"1\n2\n3\n2\n3\n4\n", []RestartPoint{home}, 4, false, false},
		{"1\n2\n3\n2\n3\n4\n", nil, 3, false, true},
		{"1\n2\n3\n2\n4\n", []RestartPoint{home}, 2, true, true},
		{"1\n2\n3\n1\n2\n1\n2\n", []RestartPoint{home, home}, 2, false, false},
		{"2\n3\n", nil, 0, true, true},
		{"1\nx\n", nil, 1, false, true},
		// The owner's file was taken with 2 or 3 written: its copy
		// writes 3 or 4 first.
		{"1\n2\n3\n4\n5\n3\n4\n", []RestartPoint{owner(3, 4)}, 4, false, false},
		{"1\n2\n3\n4\n5\n4\n5\n", []RestartPoint{owner(3, 4)}, 5, false, false},
		{"1\n2\n3\n4\n5\n2\n3\n", []RestartPoint{owner(3, 4)}, 5, false, true},
		// Killed at its checkpoint, the owner's restart falls nowhere;
		// the home's restart after it falls anywhere.
		{"1\n2\n3\n4\n5\n2\n3\n", []RestartPoint{owner(4, 4), home}, 3, false, false},
		{"1\n2\n3\n4\n5\n2\n3\n2\n", []RestartPoint{owner(2, 2)}, 3, false, true},
	} {
		last, err := CheckLines([]byte(c.file), c.points)
		if last != c.last || (err != nil) != c.bad || errors.Is(err, ErrInterleave) != c.interleave {
			t.Errorf("%q with restarts %v: %d, %v; want %d, bad %v, interleave %v", c.file, c.points, last, err, c.last, c.bad, c.interleave)
		}
	}
}

// The owner's move: a job its fence killed that its home could not
// restart, or one lost with its node whose fence holds it and whose home
// keeps no checkpoint, is restarted from the owner's file; without a file
// the first is lost; anything else is left alone.
func TestOwnerDecision(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	code := func(c int) *int { return &c }
	owners := []api.Checkpoint{{At: t0, OK: true}}
	kept := []api.Checkpoint{{At: t0, OK: true, StoredOn: "2"}}
	fenced := api.Job{State: api.StateFinished, ExitCode: code(137), EndReason: api.EndFenced, Checkpoints: owners}
	for _, c := range []struct {
		name string
		job  api.Job
		file bool
		want ownerMove
	}{
		{"running", api.Job{State: api.StateRunning, Checkpoints: owners}, true, ownerNone},
		{"finished", api.Job{State: api.StateFinished, ExitCode: code(0), Checkpoints: owners}, true, ownerNone},
		{"killed by its fence", fenced, true, ownerRestart},
		{"killed by its fence, no file", fenced, false, ownerLost},
		{"killed by another", api.Job{State: api.StateFinished, ExitCode: code(137), Checkpoints: owners}, true, ownerNone},
		{"died of a failed dump", api.Job{State: api.StateFinished, ExitCode: code(133), EndReason: api.EndDumpFailed}, true, ownerRestart},
		{"died of a failed dump, no file", api.Job{State: api.StateFinished, ExitCode: code(133), EndReason: api.EndDumpFailed}, false, ownerLost},
		{"lost, its owner's file only", api.Job{State: api.StateLost, Checkpoints: owners}, true, ownerRestart},
		{"lost, its owner's file only, no file", api.Job{State: api.StateLost, Checkpoints: owners}, false, ownerNone},
		{"lost, one kept", api.Job{State: api.StateLost, Checkpoints: kept}, true, ownerNone},
		{"lost, never checkpointed", api.Job{State: api.StateLost}, false, ownerNone},
	} {
		if got := ownerDecision(c.job, c.file); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
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

// A step that takes its limit has its agents asked for their goroutines
// and is reported hung; a step that ends before is not, and asks nothing.
func TestWatchReportsAHungStep(t *testing.T) {
	quit := make(chan struct{})
	hung := watch(10*time.Millisecond, func() { close(quit) })
	select {
	case <-quit:
	case <-time.After(time.Minute):
		t.Fatal("the watch never fired")
	}
	if !hung() {
		t.Fatal("a step past its limit not reported hung")
	}
	asked := false
	hung = watch(time.Hour, func() { asked = true })
	if h := hung(); h || asked {
		t.Fatalf("a step that ended in time: hung %v, agents asked %v", h, asked)
	}
}
