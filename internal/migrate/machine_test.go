package migrate

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

var (
	t0      = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	errGone = errors.New("destination gone")
)

// names is a step's actions as text, for the golden tables.
func names[A any](acts []A) string {
	var out []string
	for _, a := range acts {
		s := fmt.Sprintf("%T", a)
		s = strings.TrimPrefix(s, "migrate.")
		switch a := any(a).(type) {
		case Persist:
			s += "(" + string(a.Record.Outcome)
			for _, f := range []struct {
				on   bool
				name string
			}{{a.Record.Killed, "killed"}, {a.Record.Acked, "acked"}, {a.Record.Noted, "noted"}, {a.Record.Stop, "stop"}} {
				if f.on {
					s += "," + f.name
				}
			}
			s += ")"
		case PersistIn:
			s += "(" + string(a.Record.State)
			if a.Record.Restart && a.Record.Told {
				s += ",told"
			}
			if a.Record.Resumed {
				s += ",resumed"
			}
			s += ")"
		case NoteHome:
			s += fmt.Sprintf("(ok=%v)", a.OK)
		case Finish:
			s += fmt.Sprintf("(err=%v)", a.Err != nil)
		case Reply:
			s += fmt.Sprintf("(err=%v)", a.Err != nil)
		case Wake:
			s += "(+" + a.At.Sub(t0).String() + ")"
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return "-"
	}
	return strings.Join(out, " ")
}

// srcRules are the source's local safety rules, checked on every step: a
// copy is thawed only once "aborted" is persisted, killed or told to run
// elsewhere only once "committed" is, and a decision never changes.
func srcRules(t *testing.T, persisted *Outcome, acts []SourceAction) {
	t.Helper()
	for _, a := range acts {
		switch a := any(a).(type) {
		case Persist:
			o := a.Record.Outcome
			if *persisted != "" && *persisted != Pending && o != *persisted {
				t.Fatalf("decision changed from %s to %s", *persisted, o)
			}
			*persisted = o
		case Thaw:
			if *persisted != Aborted {
				t.Fatalf("Thaw with %q persisted", *persisted)
			}
		case Kill, SendCommit:
			if *persisted != Committed {
				t.Fatalf("%T with %q persisted", a, *persisted)
			}
		}
	}
}

// dstRules: the copy runs only once "committed" is persisted, is discarded
// only if it never was, and "ready" is said only of a persisted stopped copy.
func dstRules(t *testing.T, persisted *DestState, acts []DestAction) {
	t.Helper()
	for _, a := range acts {
		switch a := any(a).(type) {
		case PersistIn:
			if *persisted == DstCommitted && a.Record.State != DstCommitted {
				t.Fatalf("committed record changed to %s", a.Record.State)
			}
			*persisted = a.Record.State
		case Resume, Adopt:
			if *persisted != DstCommitted {
				t.Fatalf("%T with %q persisted", a, *persisted)
			}
		case Discard:
			if *persisted == DstCommitted {
				t.Fatal("Discard of a committed copy")
			}
		}
	}
}

type srcPoint struct {
	name  string
	build func() (*Source, Outcome)
}

// srcPoints reach every source state (and the sub-steps within one) by
// the events that lead there, or by recovery.
func srcPoints() []srcPoint {
	run := func(lazy bool, evs ...SourceEvent) func() (*Source, Outcome) {
		return func() (*Source, Outcome) {
			s := &Source{}
			var p Outcome
			all := append([]SourceEvent{Start{MID: "00000000000000aa", Job: "1.1", Home: "1", To: "2", Lazy: lazy}}, evs...)
			for _, ev := range all {
				for _, a := range s.Step(t0, ev) {
					if pa, ok := a.(Persist); ok {
						p = pa.Record.Outcome
					}
				}
			}
			return s, p
		}
	}
	rec := func(r Record) func() (*Source, Outcome) {
		return func() (*Source, Outcome) {
			s, _ := Recover(t0, r)
			return s, s.rec.Outcome
		}
	}
	base := Record{MID: "00000000000000aa", Job: "1.1", Home: "1", To: "2", Started: t0}
	with := func(f func(*Record)) Record { r := base; f(&r); return r }
	return []srcPoint{
		{"new", func() (*Source, Outcome) { return &Source{}, "" }},
		{"checking/local", run(false)},
		{"checking/destination", run(false, LocalChecked{})},
		{"dumping", run(false, LocalChecked{}, CheckAnswer{})},
		{"sending", run(false, LocalChecked{}, CheckAnswer{}, Dumped{})},
		{"committing/killing", run(false, LocalChecked{}, CheckAnswer{}, Dumped{}, ReadyAnswer{})},
		{"committing/commit-sent", run(false, LocalChecked{}, CheckAnswer{}, Dumped{}, ReadyAnswer{}, CopyGone{})},
		{"committing/retry-wait", run(false, LocalChecked{}, CheckAnswer{}, Dumped{}, ReadyAnswer{}, CopyGone{}, CommitAnswer{errGone})},
		{"done/noting-home", run(false, LocalChecked{}, CheckAnswer{}, Dumped{}, ReadyAnswer{}, CopyGone{}, CommitAnswer{})},
		{"done/home-retry-wait", run(false, LocalChecked{}, CheckAnswer{}, Dumped{}, ReadyAnswer{}, CopyGone{}, CommitAnswer{}, HomeAnswer{errGone})},
		{"done/settled", run(false, LocalChecked{}, CheckAnswer{}, Dumped{}, ReadyAnswer{}, CopyGone{}, CommitAnswer{}, HomeAnswer{})},
		{"lazy/committing", run(true, LocalChecked{}, CheckAnswer{}, Dumped{}, ReadyAnswer{})},
		{"lazy/post-copy", run(true, LocalChecked{}, CheckAnswer{}, Dumped{}, ReadyAnswer{}, CommitAnswer{})},
		{"lazy/post-copy-killing", run(true, LocalChecked{}, CheckAnswer{}, Dumped{}, ReadyAnswer{}, CommitAnswer{}, PagesDone{})},
		{"aborted/refused", run(false, LocalChecked{Pin: "holds open the device /dev/fb0"})},
		{"aborted/refused-for-now", run(false, LocalChecked{Err: errGone})},
		{"aborted/noting-home", run(false, LocalChecked{}, CheckAnswer{}, Dumped{errGone})},
		{"aborted/settled", run(false, LocalChecked{}, CheckAnswer{}, Dumped{}, ReadyAnswer{errGone}, HomeAnswer{})},
		{"recovered/pending", rec(with(func(r *Record) { r.Outcome = Pending }))},
		{"recovered/aborted", rec(with(func(r *Record) { r.Outcome, r.Noted = Aborted, true }))},
		{"recovered/committed", rec(with(func(r *Record) { r.Outcome = Committed }))},
		{"recovered/committed-killed", rec(with(func(r *Record) { r.Outcome, r.Killed = Committed, true }))},
		{"recovered/committed-lazy", rec(with(func(r *Record) { r.Outcome, r.Lazy = Committed, true }))},
	}
}

func srcEvents() []SourceEvent {
	return []SourceEvent{
		Start{MID: "00000000000000bb", Job: "1.1", Home: "1", To: "3"},
		LocalChecked{}, LocalChecked{Pin: "holds a TCP connection"}, LocalChecked{Err: errGone},
		CheckAnswer{}, CheckAnswer{errGone},
		Dumped{}, Dumped{errGone},
		ReadyAnswer{}, ReadyAnswer{errGone},
		CopyGone{},
		CommitAnswer{}, CommitAnswer{errGone},
		PagesDone{},
		HomeAnswer{}, HomeAnswer{errGone},
		Tick{},
		Written{}, Written{errGone}, Sealed{}, Sealed{errGone}, Delivered{}, Delivered{errGone},
	}
}

func eventName(ev any) string {
	s := strings.TrimPrefix(fmt.Sprintf("%T", ev), "migrate.")
	switch e := ev.(type) {
	case LocalChecked:
		if e.Pin != "" {
			s += "(pin)"
		}
		if e.Err != nil {
			s += "(err)"
		}
	case Answered:
		s += "(" + string(e.Outcome)
		if e.Err != nil {
			s += ",unreachable"
		}
		s += ")"
	case HomeDecided:
		s += "(" + string(e.Outcome)
		if e.Err != nil {
			s += ",unreachable"
		}
		s += ")"
	case ConsentAnswer:
		switch {
		case e.Refused:
			s += "(refused)"
		case e.Err != nil:
			s += "(unreachable)"
		}
	default:
		if f, ok := errField(ev); ok && f {
			s += "(err)"
		}
	}
	return s
}

func errField(ev any) (bool, bool) {
	switch e := ev.(type) {
	case CheckAnswer:
		return e.Err != nil, true
	case Dumped:
		return e.Err != nil, true
	case ReadyAnswer:
		return e.Err != nil, true
	case CommitAnswer:
		return e.Err != nil, true
	case PagesDone:
		return e.Err != nil, true
	case HomeAnswer:
		return e.Err != nil, true
	case Received:
		return e.Err != nil, true
	case Restored:
		return e.Err != nil, true
	case Written:
		return e.Err != nil, true
	case Sealed:
		return e.Err != nil, true
	case Delivered:
		return e.Err != nil, true
	case Verified:
		return e.Err != nil, true
	case HomeTold:
		return e.Err != nil, true
	}
	return false, false
}

// TestSourceEveryStateEveryEvent steps every reachable source state with
// every event, checks the safety rules on each step, and compares the
// whole table with testdata/source.golden.
func TestSourceEveryStateEveryEvent(t *testing.T) {
	var b strings.Builder
	base := Record{MID: "00000000000000aa", Job: "1.1", Home: "1", To: "2", Started: t0}
	for _, r := range []Record{
		{Outcome: Pending}, {Outcome: Aborted}, {Outcome: Aborted, Noted: true},
		{Outcome: Committed}, {Outcome: Committed, Killed: true}, {Outcome: Committed, Killed: true, Acked: true},
		{Outcome: Committed, Killed: true, Acked: true, Noted: true}, {Outcome: Committed, Lazy: true},
		{Outcome: Committed, Lazy: true, Killed: true},
	} {
		r.MID, r.Job, r.Home, r.To, r.Started = base.MID, base.Job, base.Home, base.To, base.Started
		var persisted Outcome = r.Outcome
		s, acts := Recover(t0, r)
		srcRules(t, &persisted, acts)
		fmt.Fprintf(&b, "recover %-42s -> %-11s %s\n", names([]SourceAction{Persist{r}}), s.State(), names(acts))
	}
	for _, p := range srcPoints() {
		for _, ev := range srcEvents() {
			s, persisted := p.build()
			before := s.State()
			acts := s.Step(t0.Add(time.Second), ev)
			srcRules(t, &persisted, acts)
			fmt.Fprintf(&b, "%-28s %-22s -> %-11s %s\n", p.name+"("+before.String()+")", eventName(ev), s.State(), names(acts))
		}
	}
	golden(t, "source.golden", b.String())
}

// late is an event that comes after a while.
type late struct {
	after time.Duration
	ev    DestEvent
}

func (late) destEvent() {}

type dstPoint struct {
	name  string
	build func() (*Dest, DestState)
}

func dstPoints() []dstPoint {
	run := func(evs ...DestEvent) func() (*Dest, DestState) {
		return func() (*Dest, DestState) {
			d := &Dest{}
			var p DestState
			for _, ev := range evs {
				now := t0
				if l, ok := ev.(late); ok {
					now, ev = t0.Add(l.after), l.ev
				}
				for _, a := range d.Step(now, ev) {
					if pa, ok := a.(PersistIn); ok {
						p = pa.Record.State
					}
				}
			}
			return d, p
		}
	}
	rec := func(st DestState) func() (*Dest, DestState) {
		return func() (*Dest, DestState) {
			d, _ := RecoverDest(t0, InRecord{MID: "00000000000000aa", Job: "1.1", From: "1", State: st, Started: t0, PID: 7})
			return d, d.rec.State
		}
	}
	offer := Offer{MID: "00000000000000aa", Job: "1.1", From: "1"}
	stream := Stream{MID: "00000000000000aa", Job: "1.1", From: "1", Streamed: true}
	return []dstPoint{
		{"new", run()},
		{"sink-open", run(offer)},
		{"receiving", run(offer, stream)},
		{"restoring", run(offer, stream, Received{})},
		{"stopped", run(offer, stream, Received{}, Restored{PID: 7})},
		{"asking", run(offer, stream, Received{}, Restored{PID: 7}, late{CommitWait, Tick{}})},
		{"committed", run(offer, stream, Received{}, Restored{PID: 7}, CommitMsg{})},
		{"committed/resumed", run(offer, stream, Received{}, Restored{PID: 7}, CommitMsg{}, Resumed{})},
		{"aborted/restore-failed", run(offer, stream, Received{}, Restored{Err: errGone})},
		{"aborted/while-restoring", run(offer, stream, Received{}, AbortMsg{})},
		{"recovered/restoring", rec(DstRestoring)},
		{"recovered/stopped", rec(DstStopped)},
		{"recovered/committed", rec(DstCommitted)},
	}
}

func dstEvents() []DestEvent {
	return []DestEvent{
		Offer{MID: "00000000000000aa", Job: "1.1", From: "1"},
		Stream{MID: "00000000000000aa", Job: "1.1", From: "1", Streamed: true},
		Stream{MID: "00000000000000cc", Job: "1.1", From: "1", Lazy: true},
		Received{}, Received{errGone},
		Restored{PID: 8}, Restored{Err: errGone},
		CommitMsg{}, AbortMsg{},
		Answered{Outcome: Committed}, Answered{Outcome: Aborted}, Answered{Outcome: Unknown},
		Answered{Outcome: Pending}, Answered{Err: errGone},
		Tick{},
		Restart{MID: "00000000000000dd", Job: "1.1", Home: "1", File: "f"},
		Verified{}, Verified{errGone},
		ConsentAnswer{Inc: 2}, ConsentAnswer{Refused: true, Err: errGone}, ConsentAnswer{Err: errGone},
		HomeDecided{Outcome: Committed}, HomeDecided{Outcome: Aborted}, HomeDecided{Outcome: Unknown},
		HomeDecided{Outcome: Pending}, HomeDecided{Err: errGone},
		HomeTold{}, HomeTold{errGone},
		Resumed{},
	}
}

// TestDestEveryStateEveryEvent is the same for the destination; the tick
// comes after CommitWait and SinkWait, so every timer is due.
func TestDestEveryStateEveryEvent(t *testing.T) {
	var b strings.Builder
	for _, st := range []DestState{DstSinkOpen, DstReceiving, DstRestoring, DstStopped, DstAsking, DstCommitted, DstAborted} {
		for _, resumed := range []bool{false, true} {
			if resumed && st != DstCommitted {
				continue
			}
			persisted := st
			r := InRecord{MID: "00000000000000aa", Job: "1.1", From: "1", State: st, Started: t0, PID: 7, Resumed: resumed}
			d, acts := RecoverDest(t0, r)
			dstRules(t, &persisted, acts)
			fmt.Fprintf(&b, "recover %-22s -> %-10s %s\n", names([]DestAction{PersistIn{r}}), d.State(), names(acts))
		}
	}
	for _, p := range dstPoints() {
		for _, ev := range dstEvents() {
			d, persisted := p.build()
			before := d.State()
			at := t0.Add(time.Second)
			if _, ok := ev.(Tick); ok {
				at = t0.Add(SinkWait)
			}
			acts := d.Step(at, ev)
			dstRules(t, &persisted, acts)
			fmt.Fprintf(&b, "%-24s %-22s -> %-10s %s\n", p.name+"("+string(before)+")", eventName(ev), d.State(), names(acts))
		}
	}
	golden(t, "dest.golden", b.String())
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/migrate -update to write it)", err)
	}
	if string(want) != got {
		gl, wl := strings.Split(got, "\n"), strings.Split(string(want), "\n")
		for i := range min(len(gl), len(wl)) {
			if gl[i] != wl[i] {
				t.Fatalf("%s line %d:\n got  %s\n want %s", name, i+1, gl[i], wl[i])
			}
		}
		t.Fatalf("%s: %d lines, want %d", name, len(gl), len(wl))
	}
}

// TestHomeNoteRetriesBackOff: a home that does not answer is told again
// after 2 s, then 4, 8, ... up to HomeRetryMax, and not again once it
// answers: a home away for a day costs a node a few hundred notes a
// migration, not tens of thousands.
func TestHomeNoteRetriesBackOff(t *testing.T) {
	s := &Source{}
	now := t0
	for _, ev := range []SourceEvent{Start{MID: "00000000000000aa", Job: "1.1", Home: "1", To: "2"}, LocalChecked{}, CheckAnswer{},
		Dumped{}, ReadyAnswer{}, CopyGone{}, CommitAnswer{}} {
		s.Step(now, ev)
	}
	var waits []time.Duration
	for try := range 12 {
		var wake time.Time
		for _, a := range s.Step(now, HomeAnswer{errGone}) {
			if w, ok := a.(Wake); ok {
				wake = w.At
			}
		}
		if wake.IsZero() {
			t.Fatalf("try %d: no retry of the home note", try+1)
		}
		waits = append(waits, wake.Sub(now))
		if got := s.Step(wake.Add(-time.Millisecond), Tick{}); len(got) != 0 {
			t.Fatalf("try %d: %v before its time", try+1, got)
		}
		now = wake
		if got := s.Step(now, Tick{}); len(got) != 1 || got[0] != (NoteHome{OK: true}) {
			t.Fatalf("try %d: at its time %v, want the note again", try+1, got)
		}
	}
	want := []time.Duration{2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300, 300}
	for i := range want {
		if waits[i] != want[i]*time.Second {
			t.Fatalf("waits %v, want %v seconds", waits, want)
		}
	}
	for _, a := range s.Step(now, HomeAnswer{}) {
		if _, ok := a.(Wake); ok {
			t.Fatalf("a retry after the home answered: %v", a)
		}
	}
}
