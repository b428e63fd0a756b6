package migrate

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// The golden tables of the file endpoints: a checkpoint (a source whose
// destination is a sealed file) and a restart (a destination whose source
// is one), every point of each stepped with every event of its machine.

// ckptRules are a checkpoint's local safety rules: the job is killed only
// once "committed" is persisted, and a stopped job's thaw never follows
// it; the file is removed only once "aborted" is, and written, sealed and
// delivered only while undecided; a decision never changes; nothing goes
// to another node.
func ckptRules(t *testing.T, stop bool, persisted *Outcome, acts []SourceAction) {
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
			if stop && *persisted != Aborted {
				t.Fatalf("a stopping checkpoint thaws with %q persisted", *persisted)
			}
		case Kill:
			if !stop || *persisted != Committed {
				t.Fatalf("Kill (stop %v) with %q persisted", stop, *persisted)
			}
		case RemoveFile:
			if *persisted != Aborted {
				t.Fatalf("RemoveFile with %q persisted", *persisted)
			}
		case Dump, WriteFile, SealFile, Deliver:
			if *persisted != Pending {
				t.Fatalf("%T with %q persisted", a, *persisted)
			}
		case SendCheck, SendImages, SendCommit, SendAbort, WaitPages:
			t.Fatalf("a checkpoint asks for %T", a)
		}
	}
}

var ckptStart = Start{MID: "00000000000000aa", Job: "1.1", Home: "1", Target: TargetFile, Inc: 1}

func ckptPoints() []srcPoint {
	run := func(stop bool, evs ...SourceEvent) func() (*Source, Outcome) {
		return func() (*Source, Outcome) {
			s := &Source{}
			var p Outcome
			st := ckptStart
			st.Stop = stop
			for _, ev := range append([]SourceEvent{st}, evs...) {
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
	base := Record{MID: "00000000000000aa", Job: "1.1", Home: "1", Target: TargetFile, Started: t0}
	with := func(f func(*Record)) Record { r := base; f(&r); return r }
	ok := []SourceEvent{LocalChecked{}, Dumped{}, Written{}, Sealed{}, Delivered{}}
	upTo := func(n int, more ...SourceEvent) []SourceEvent {
		return append(append([]SourceEvent{}, ok[:n]...), more...)
	}
	return []srcPoint{
		{"new", func() (*Source, Outcome) { return &Source{}, "" }},
		{"checking", run(false)},
		{"dumping", run(false, upTo(1)...)},
		{"writing", run(false, upTo(2)...)},
		{"sealing", run(false, upTo(3)...)},
		{"delivering", run(false, upTo(4)...)},
		{"done/noting-home", run(false, upTo(5)...)},
		{"done/home-retry-wait", run(false, upTo(5, HomeAnswer{errGone})...)},
		{"done/settled", run(false, upTo(5, HomeAnswer{})...)},
		{"stop/writing", run(true, upTo(2)...)},
		{"stop/delivering", run(true, upTo(4)...)},
		{"stop/killing", run(true, upTo(5)...)},
		{"stop/noting-home", run(true, upTo(5, CopyGone{})...)},
		{"stop/settled", run(true, upTo(5, CopyGone{}, HomeAnswer{})...)},
		{"aborted/pinned", run(false, LocalChecked{Pin: "holds a TCP connection"})},
		{"aborted/dump", run(false, upTo(1, Dumped{errGone})...)},
		{"aborted/write", run(false, upTo(2, Written{errGone})...)},
		{"aborted/seal", run(false, upTo(3, Sealed{errGone})...)},
		{"aborted/delivery", run(false, upTo(4, Delivered{errGone})...)},
		{"stop/aborted/delivery", run(true, upTo(4, Delivered{errGone})...)},
		{"aborted/settled", run(true, upTo(3, Sealed{errGone}, HomeAnswer{})...)},
		{"recovered/pending", rec(with(func(r *Record) { r.Outcome = Pending }))},
		{"recovered/aborted", rec(with(func(r *Record) { r.Outcome, r.Noted = Aborted, true }))},
		{"recovered/committed", rec(with(func(r *Record) { r.Outcome = Committed }))},
		{"recovered/stop", rec(with(func(r *Record) { r.Outcome, r.Stop = Committed, true }))},
		{"recovered/stop-killed", rec(with(func(r *Record) { r.Outcome, r.Stop, r.Killed = Committed, true, true }))},
	}
}

// TestCheckpointEveryStateEveryEvent steps every point of a checkpoint
// with every source event, checks the rules on each step, and compares
// the table with testdata/checkpoint.golden.
func TestCheckpointEveryStateEveryEvent(t *testing.T) {
	var b strings.Builder
	for _, r := range []Record{
		{Outcome: Pending}, {Outcome: Pending, Stop: true}, {Outcome: Aborted}, {Outcome: Aborted, Noted: true},
		{Outcome: Committed}, {Outcome: Committed, Noted: true}, {Outcome: Committed, Stop: true},
		{Outcome: Committed, Stop: true, Killed: true}, {Outcome: Committed, Stop: true, Killed: true, Noted: true},
	} {
		r.MID, r.Job, r.Home, r.Target, r.Started = "00000000000000aa", "1.1", "1", TargetFile, t0
		persisted := r.Outcome
		s, acts := Recover(t0, r)
		ckptRules(t, r.Stop, &persisted, acts)
		fmt.Fprintf(&b, "recover %-36s -> %-11s %s\n", names([]SourceAction{Persist{r}}), s.State(), names(acts))
	}
	for _, p := range ckptPoints() {
		for _, ev := range srcEvents() {
			s, persisted := p.build()
			before := s.State()
			at := t0.Add(time.Second)
			if _, ok := ev.(Tick); ok {
				at = t0.Add(time.Minute) // every retry is due
			}
			if st, ok := ev.(Start); ok {
				st.Target = TargetFile
				ev = st
			}
			acts := s.Step(at, ev)
			ckptRules(t, s.Record().Stop, &persisted, acts)
			fmt.Fprintf(&b, "%-32s %-20s -> %-10s %s\n", p.name+"("+before.String()+")", eventName(ev), s.State(), names(acts))
		}
	}
	golden(t, "checkpoint.golden", b.String())
}

// restartRules: the copy is restored only once the home's consent is
// persisted, runs only once "committed" is, and is discarded only if it
// never was; the home is asked to commit only of a persisted stopped copy.
func restartRules(t *testing.T, persisted *DestState, acts []DestAction) {
	t.Helper()
	dstRules(t, persisted, acts)
	for _, a := range acts {
		switch a := any(a).(type) {
		case Receive:
			if *persisted != DstReceiving {
				t.Fatalf("Receive with %q persisted", *persisted)
			}
		case Restore:
			if *persisted != DstRestoring {
				t.Fatalf("Restore with %q persisted", *persisted)
			}
		case CommitAtHome:
			if *persisted != DstStopped {
				t.Fatalf("CommitAtHome with %q persisted", *persisted)
			}
		case AskConsent, Verify:
			want := map[bool]DestState{true: DstConsent, false: DstVerifying}[fmt.Sprintf("%T", a) == "migrate.AskConsent"]
			if *persisted != want {
				t.Fatalf("%T with %q persisted", a, *persisted)
			}
		case Ask, SendAbort:
			t.Fatalf("a restart asks for %T", a)
		}
	}
}

var restartStart = Restart{MID: "00000000000000aa", Job: "1.1", Home: "1", File: "/state/ckpt/.restore-aa.roamckpt"}

func restartPoints() []dstPoint {
	run := func(evs ...DestEvent) func() (*Dest, DestState) {
		return func() (*Dest, DestState) {
			d := &Dest{}
			var p DestState
			for _, ev := range append([]DestEvent{restartStart}, evs...) {
				for _, a := range d.Step(t0, ev) {
					if pa, ok := a.(PersistIn); ok {
						p = pa.Record.State
					}
				}
			}
			return d, p
		}
	}
	rec := func(st DestState, told bool) func() (*Dest, DestState) {
		return func() (*Dest, DestState) {
			d, _ := RecoverDest(t0, InRecord{MID: "00000000000000aa", Job: "1.1", Home: "1", Restart: true, State: st, Told: told, Started: t0, PID: 7, Inc: 2})
			return d, d.rec.State
		}
	}
	granted := []DestEvent{Verified{}, ConsentAnswer{Inc: 2}}
	upTo := func(more ...DestEvent) []DestEvent { return append(append([]DestEvent{}, granted...), more...) }
	return []dstPoint{
		{"new", func() (*Dest, DestState) { return &Dest{}, "" }},
		{"verifying", run()},
		{"consent", run(Verified{})},
		{"receiving", run(upTo()...)},
		{"restoring", run(upTo(Received{})...)},
		{"stopped/committing", run(upTo(Received{}, Restored{PID: 7})...)},
		{"stopped/retry-wait", run(upTo(Received{}, Restored{PID: 7}, HomeDecided{Err: errGone})...)},
		{"committed", run(upTo(Received{}, Restored{PID: 7}, HomeDecided{Outcome: Committed})...)},
		{"committed/resumed", run(upTo(Received{}, Restored{PID: 7}, HomeDecided{Outcome: Committed}, Resumed{})...)},
		{"aborted/bad-file", run(Verified{errGone})},
		{"aborted/refused", run(Verified{}, ConsentAnswer{Refused: true, Err: errGone})},
		{"aborted/no-consent-answer", run(Verified{}, ConsentAnswer{Err: errGone})},
		{"aborted/unpack", run(upTo(Received{errGone})...)},
		{"aborted/restore", run(upTo(Received{}, Restored{Err: errGone})...)},
		{"aborted/tell-retry-wait", run(upTo(Received{}, Restored{Err: errGone}, HomeTold{errGone})...)},
		{"aborted/told", run(upTo(Received{}, Restored{Err: errGone}, HomeTold{})...)},
		{"aborted/home-aborted", run(upTo(Received{}, Restored{PID: 7}, HomeDecided{Outcome: Aborted})...)},
		{"recovered/consent", rec(DstConsent, false)},
		{"recovered/stopped", rec(DstStopped, false)},
		{"recovered/aborted-untold", rec(DstAborted, false)},
	}
}

// TestRestartEveryStateEveryEvent is the same for a restart; the tick
// comes after every retry is due.
func TestRestartEveryStateEveryEvent(t *testing.T) {
	var b strings.Builder
	for _, st := range []DestState{DstVerifying, DstConsent, DstReceiving, DstRestoring, DstStopped, DstCommitted, DstAborted} {
		for _, flag := range []bool{false, true} {
			// flag: told, of an aborted run; resumed, of a committed one.
			if flag && st != DstAborted && st != DstCommitted {
				continue
			}
			told, resumed := flag && st == DstAborted, flag && st == DstCommitted
			persisted := st
			r := InRecord{MID: "00000000000000aa", Job: "1.1", Home: "1", Restart: true, State: st, Told: told, Resumed: resumed, Started: t0, PID: 7, Inc: 2}
			d, acts := RecoverDest(t0, r)
			restartRules(t, &persisted, acts)
			fmt.Fprintf(&b, "recover %-24s -> %-10s %s\n", names([]DestAction{PersistIn{r}}), d.State(), names(acts))
		}
	}
	for _, p := range restartPoints() {
		for _, ev := range dstEvents() {
			d, persisted := p.build()
			before := d.State()
			at := t0.Add(time.Second)
			if _, ok := ev.(Tick); ok {
				at = t0.Add(SinkWait)
			}
			acts := d.Step(at, ev)
			restartRules(t, &persisted, acts)
			fmt.Fprintf(&b, "%-32s %-22s -> %-10s %s\n", p.name+"("+string(before)+")", eventName(ev), d.State(), names(acts))
		}
	}
	golden(t, "restart.golden", b.String())
}

// A restart's home may consent and lose its answer: the restart that
// gives up tells it, again and again until it has; a refusal is not told.
func TestRestartTellsTheHome(t *testing.T) {
	d := &Dest{}
	d.Step(t0, restartStart)
	d.Step(t0, Verified{})
	want(t, "consent lost", d.Step(t0, ConsentAnswer{Err: errStall}), "PersistIn(aborted) Discard TellHome Reply(err=true)")
	want(t, "home unreachable", d.Step(t0, HomeTold{errDown}), "Wake(+2s)")
	want(t, "not yet", d.Step(t0.Add(HomeRetry-time.Millisecond), Tick{}), "-")
	want(t, "told again", d.Step(t0.Add(HomeRetry), Tick{}), "TellHome")
	if d.Settled() || DestExpired(d.Record(), t0.Add(24*time.Hour)) {
		t.Error("a restart whose home was not told is settled or expired")
	}
	want(t, "told", d.Step(t0.Add(HomeRetry), HomeTold{}), "PersistIn(aborted,told)")
	if !d.Settled() {
		t.Error("a told restart is not settled")
	}
	d = &Dest{}
	d.Step(t0, restartStart)
	d.Step(t0, Verified{})
	want(t, "refused", d.Step(t0, ConsentAnswer{Refused: true, Err: errFailed}), "PersistIn(aborted,told) Discard Reply(err=true)")
}

// A checkpoint's job is frozen only for the dump, unless it is to stop:
// then it stays frozen until its file is delivered, is killed only once
// "committed" is persisted, and thawed when the delivery fails.
func TestCheckpointStop(t *testing.T) {
	s := &Source{}
	s.Step(t0, ckptStart)
	s.Step(t0, LocalChecked{})
	want(t, "thawed after the dump", s.Step(t0, Dumped{}), "Thaw WriteFile")
	st := ckptStart
	st.Stop = true
	for _, c := range []struct {
		ev   SourceEvent
		acts string
	}{
		{LocalChecked{}, "Persist(pending,stop) Dump"},
		{Dumped{}, "WriteFile"},
		{Written{}, "SealFile"},
		{Sealed{}, "Deliver"},
		{Delivered{errGone}, "Persist(aborted,stop) Thaw RemoveFile NoteHome(ok=false)"},
	} {
		if c.ev == (LocalChecked{}) {
			s = &Source{}
			s.Step(t0, st)
		}
		want(t, eventName(c.ev), s.Step(t0, c.ev), c.acts)
	}
	if !strings.Contains(s.Err().Error(), ErrNotDelivered.Error()) {
		t.Errorf("an undelivered checkpoint says %v", s.Err())
	}
}
