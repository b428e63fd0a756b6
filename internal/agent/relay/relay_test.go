package relay

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"roam/internal/api"
	"roam/internal/job"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func ip(i int) *int { return &i }

// Apply's rules, one update at a time, on a running job recorded on n2
// after one move.
func TestApply(t *testing.T) {
	running := func() job.Record {
		return job.Record{ID: "n1.1", UID: 70001, State: job.StateRunning, Node: "n2", Migrations: 1,
			Newest: &api.Checkpoint{StoredOn: "n3"}}
	}
	lost := func() job.Record {
		r := running()
		r.State, r.LostAt = job.StateLost, now.Add(-time.Minute)
		return r
	}
	for _, tc := range []struct {
		name      string
		rec       job.Record
		u         Update
		out, errb int64
		want      func(job.Record) string
		changed   bool
		over      bool
		event     string
		heard     bool
		drop      bool
	}{
		{name: "output only", rec: running(), u: Update{ID: "n1.1", Node: "n2", Moves: ip(1)}, heard: true,
			want: func(r job.Record) string {
				return check(r.State == job.StateRunning && r.Node == "n2", "state or node changed")
			}},
		{name: "a starting job's node answers", rec: func() job.Record { r := running(); r.State = job.StateStarting; return r }(),
			u: Update{ID: "n1.1", Node: "n2", Moves: ip(1)}, changed: true, heard: true,
			want: func(r job.Record) string { return check(r.State == job.StateRunning, "still "+r.State) }},
		{name: "its end, with what it used", rec: running(), u: Update{ID: "n1.1", Node: "n2", Exit: ip(0), Used: &job.Usage{CPUSeconds: 12.5, PeakMB: 300}},
			changed: true, over: true, heard: true, drop: true,
			want: func(r job.Record) string {
				return check(r.State == job.StateFinished && r.Used.CPUSeconds == 12.5 && r.Used.PeakMB == 300, fmt.Sprintf("%s %+v", r.State, r.Used))
			}},
		{name: "its end, with a use out of range", rec: running(), u: Update{ID: "n1.1", Node: "n2", Exit: ip(0), Used: &job.Usage{CPUSeconds: -1, PeakMB: 1e300}},
			changed: true, over: true, heard: true, drop: true,
			want: func(r job.Record) string { return check(r.Used == job.Usage{}, fmt.Sprintf("kept %+v", r.Used)) }},
		{name: "sent before a move", rec: running(), u: Update{ID: "n1.1", Node: "n9", Moves: ip(0)},
			want: func(r job.Record) string { return check(r.Node == "n2", "an old copy's node was taken") }},
		{name: "an old copy's end, sent before a move", rec: running(), u: Update{ID: "n1.1", Node: "n9", Moves: ip(0), Exit: ip(137), Why: "killed"},
			want: func(r job.Record) string {
				return check(r.State == job.StateRunning && r.ExitCode == nil && r.EndReason == "" && r.Newest != nil, "the job ended with a copy it moved on from")
			}},
		{name: "a move not noted yet", rec: running(), u: Update{ID: "n1.1", Node: "n4", Moves: ip(2)}, changed: true, heard: true,
			want: func(r job.Record) string { return check(r.Node == "n4" && r.Migrations == 2, "the move was not taken") }},
		{name: "a lost job's node answers", rec: lost(), u: Update{ID: "n1.1", Node: "n2", Moves: ip(1)}, changed: true, heard: true, event: "back",
			want: func(r job.Record) string {
				return check(r.State == job.StateRunning && r.LostAt.IsZero(), "not revived")
			}},
		{name: "a lost job moved on", rec: lost(), u: Update{ID: "n1.1", Node: "n5", Moves: ip(3)}, changed: true, heard: true, event: "back",
			want: func(r job.Record) string {
				return check(r.State == job.StateRunning && r.Node == "n5", "not revived where it runs")
			}},
		{name: "ended by its node", rec: running(), u: Update{ID: "n1.1", Node: "n2", Why: strings.Repeat("é", 300)}, changed: true, heard: true,
			want: func(r job.Record) string {
				return check(len(r.EndReason) <= 200 && strings.HasPrefix(r.EndReason, "é"), "reason not bounded: "+r.EndReason)
			}},
		{name: "exit with all output in", rec: running(), u: Update{ID: "n1.1", Node: "n2", Exit: ip(3), FinalOut: 5, FinalErr: 2}, out: 5, errb: 2,
			changed: true, over: true, heard: true, drop: true,
			want: func(r job.Record) string {
				return check(r.State == job.StateFinished && *r.ExitCode == 3 && r.Ended.Equal(now), "not finished with its code")
			}},
		{name: "exit with output missing", rec: running(), u: Update{ID: "n1.1", Node: "n2", Exit: ip(0), FinalOut: 5, FinalErr: 2}, out: 4, errb: 2, heard: true,
			want: func(r job.Record) string {
				return check(r.State == job.StateRunning, "finished before its output was in")
			}},
		{name: "exit with output its node dropped", rec: running(), u: Update{ID: "n1.1", Node: "n2", Exit: ip(137), FinalOut: 5, FinalErr: 2, Dropped: 3 << 20},
			out: 5, errb: 2, changed: true, over: true, heard: true, drop: true,
			want: func(r job.Record) string {
				return check(r.State == job.StateFinished && strings.Contains(r.OutputCut, "3.0 MiB") && r.EndReason == "", "cut not said: "+r.OutputCut)
			}},
		{name: "exit with all output in says no cut", rec: running(), u: Update{ID: "n1.1", Node: "n2", Exit: ip(0)},
			changed: true, over: true, heard: true, drop: true,
			want: func(r job.Record) string { return check(r.OutputCut == "", "a cut said: "+r.OutputCut) }},
		{name: "an older agent's update", rec: lost(), u: Update{ID: "n1.1"}, changed: true, event: "back",
			want: func(r job.Record) string {
				return check(r.Node == "n2" && r.State == job.StateRunning, "not revived on its node")
			}},
	} {
		rec := tc.rec
		res := Apply(&rec, tc.u, tc.out, tc.errb, now)
		if msg := tc.want(rec); msg != "" {
			t.Errorf("%s: %s: %+v", tc.name, msg, rec)
		}
		ev := ""
		if res.Event != nil {
			ev = res.Event.Kind
		}
		if res.Changed != tc.changed || res.Over != tc.over || ev != tc.event || res.Heard != tc.heard || (res.Drop != nil) != tc.drop {
			t.Errorf("%s: result %+v (event %q), want changed %v over %v event %q heard %v drop %v",
				tc.name, res, ev, tc.changed, tc.over, tc.event, tc.heard, tc.drop)
		}
		// A checkpoint dropped where it is kept is named by the record no
		// more: a restart of the job (roam restart of its owner's file)
		// would take it for kept, and restart its next loss from nothing.
		if tc.drop && (res.Drop.StoredOn != "n3" || rec.Newest != nil) {
			t.Errorf("%s: dropped %+v, the record's newest still %+v", tc.name, res.Drop, rec.Newest)
		}
	}
}

func check(ok bool, msg string) string {
	if ok {
		return ""
	}
	return msg
}

// An exit of a copy its node's fence killed restarts the job from a
// checkpoint kept elsewhere, and leaves the record as it is; without one
// it is the job's end.
func TestApplyFenced(t *testing.T) {
	kept := &api.Checkpoint{OK: true, StoredOn: "n1"}
	for _, tc := range []struct {
		name   string
		newest *api.Checkpoint
		fenced bool
	}{
		{"kept elsewhere", kept, true},
		{"none", nil, false},
		{"kept on the node that killed it", &api.Checkpoint{OK: true, StoredOn: "n2"}, false},
		{"failed", &api.Checkpoint{StoredOn: "n1"}, false},
	} {
		rec := job.Record{ID: "n1.1", State: job.StateRunning, Node: "n2", Newest: tc.newest}
		res := Apply(&rec, Update{ID: "n1.1", Node: "n2", Exit: ip(137), Fenced: true}, 0, 0, now)
		switch {
		case res.Fenced != tc.fenced:
			t.Errorf("%s: fenced %v", tc.name, res.Fenced)
		case tc.fenced && (rec.State != job.StateRunning || rec.ExitCode != nil || res.Over || res.Drop != nil):
			t.Errorf("%s: record %s exit %v, over %v, drop %v: want it left for the restart", tc.name, rec.State, rec.ExitCode, res.Over, res.Drop)
		case !tc.fenced && (rec.State != job.StateFinished || !res.Over):
			t.Errorf("%s: record %s, over %v: want its end", tc.name, rec.State, res.Over)
		case !tc.fenced && rec.EndReason != api.EndFenced:
			t.Errorf("%s: end reason %q: want the fence's, which says what brings it back", tc.name, rec.EndReason)
		}
	}
	// Killed by anything else, it ends with no reason of the fence's.
	rec := job.Record{ID: "n1.1", State: job.StateRunning, Node: "n2"}
	if Apply(&rec, Update{ID: "n1.1", Node: "n2", Exit: ip(137)}, 0, 0, now); rec.EndReason != "" {
		t.Errorf("a kill not by the fence: end reason %q", rec.EndReason)
	}
}
