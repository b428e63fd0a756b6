package carry

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"roam/internal/sweep"
)

func seen(states ...string) []Seen {
	var out []Seen
	for i, s := range states {
		out = append(out, Seen{ID: "1." + string(rune('a'+i)), Index: i, State: s})
	}
	return out
}

// At the warning, the running and starting jobs are checkpointed, lowest
// index first; finished, lost and pending ones are not (nothing runs).
func TestWarningCheckpointsWhatRuns(t *testing.T) {
	s := seen(sweep.Finished, sweep.Running, sweep.Pending, sweep.Starting, sweep.Lost, sweep.Running)
	slices.Reverse(s) // the order the home lists them in does not matter
	got := Warning(s)
	want := []string{"1.b", "1.d", "1.f"}
	if !slices.Equal(got, want) {
		t.Fatalf("Warning = %v, want %v", got, want)
	}
}

// The record lists every job, with a file only for those whose
// checkpoint was taken whole, and the Restarts the home said.
func TestRecordKeepsTakenCheckpoints(t *testing.T) {
	s := seen(sweep.Finished, sweep.Running, sweep.Running)
	s[1].Restarts = 2
	st := Record(State{Version: Version, Sweep: "n1:4"}, s, map[string]bool{"1.b": true})
	want := []Job{{ID: "1.a", Index: 0}, {ID: "1.b", Index: 1, File: "1.b.roamckpt", Restarts: 2}, {ID: "1.c", Index: 2}}
	if !slices.Equal(st.Jobs, want) || st.Sweep != "n1:4" {
		t.Fatalf("Record = %+v, want jobs %+v", st, want)
	}
	if Done(st, s[:1]) {
		t.Fatal("Done with a job carried")
	}
}

// A resume refuses while any job of the sweep is pending, starting or
// running, naming each; restarts each file whose job its home restarted
// as often as when it was taken; drops a file restarted since (stale);
// and refuses a job its home no longer lists.
func TestResumeRestartsOnceAndNeverBeside(t *testing.T) {
	st := State{Version: Version, Sweep: "n1:4", Jobs: []Job{
		{ID: "1.a", Index: 0},
		{ID: "1.b", Index: 1, File: "1.b.roamckpt", Restarts: 0},
		{ID: "1.c", Index: 2, File: "1.c.roamckpt", Restarts: 1},
	}}
	now := seen(sweep.Finished, sweep.Finished, sweep.Finished)
	now[2].Restarts = 2 // restarted since its checkpoint: a crashed resume's
	p, err := Resume(st, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Restart) != 1 || p.Restart[0].ID != "1.b" || len(p.Stale) != 1 || p.Stale[0].ID != "1.c" {
		t.Fatalf("Resume = %+v", p)
	}
	for _, live := range []string{sweep.Running, sweep.Starting, sweep.Pending} {
		now := seen(sweep.Finished, sweep.Finished, live)
		_, err := Resume(st, now)
		if !errors.Is(err, ErrLive) || !strings.Contains(err.Error(), "1.c ("+live+")") {
			t.Errorf("a job %s: %v, want refused naming it", live, err)
		}
	}
	if _, err := Resume(st, seen(sweep.Finished)); err == nil || !strings.Contains(err.Error(), "1.b") {
		t.Errorf("a job the home does not list: %v", err)
	}
	// Once restarted, its file is out of the state: never restarted again.
	after := Restarted(st, "1.b", 1)
	if after.Jobs[1].File != "" || after.Jobs[1].Restarts != 1 || st.Jobs[1].File == "" {
		t.Fatalf("Restarted = %+v (before %+v)", after.Jobs, st.Jobs)
	}
	now = seen(sweep.Finished, sweep.Finished, sweep.Finished)
	now[1].Restarts = 1
	if p, _ := Resume(after, now); len(p.Restart) != 0 {
		t.Fatalf("resume after the restart: %+v", p)
	}
}

// The sweep is done once nothing runs and nothing is carried.
func TestDone(t *testing.T) {
	st := State{Jobs: []Job{{ID: "1.a"}, {ID: "1.b"}}}
	if !Done(st, seen(sweep.Finished, sweep.Lost)) {
		t.Error("not done with every job ended")
	}
	if Done(st, seen(sweep.Finished, sweep.Running)) {
		t.Error("done with a job running")
	}
}

// A state file is checked as it is read: version, sweep id, job ids
// (a file name is made of them), files named after their jobs.
func TestCheckState(t *testing.T) {
	good := State{Version: Version, Sweep: "n1:4", Jobs: []Job{{ID: "1.a", File: "1.a.roamckpt"}}}
	if err := Check(good); err != nil {
		t.Fatal(err)
	}
	for name, st := range map[string]State{
		"version":   {Version: 9, Sweep: "n1:4"},
		"sweep":     {Version: Version, Sweep: "n1.4"},
		"twice":     {Version: Version, Sweep: "n1:4", Jobs: []Job{{ID: "1.a"}, {ID: "1.a"}}},
		"slash":     {Version: Version, Sweep: "n1:4", Jobs: []Job{{ID: "../x"}}},
		"file name": {Version: Version, Sweep: "n1:4", Jobs: []Job{{ID: "1.a", File: "../etc/passwd"}}},
	} {
		if Check(st) == nil {
			t.Errorf("%s: a bad state was taken", name)
		}
	}
	if SameRun(State{Argv: []string{"-n", "6", "--", "burn"}}, []string{"-n", "7", "--", "burn"}) == nil {
		t.Error("another run of the same directory was taken")
	}
}
