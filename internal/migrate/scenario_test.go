package migrate

import (
	"testing"
	"time"
)

// The fault points the protocol must survive, each as a short story of
// both machines. The golden tables cover every state × event; these say
// in words what each fault must lead to.

// steps feeds events to a machine and returns the actions of the last.
func srcAfter(evs ...SourceEvent) (*Source, []SourceAction) {
	s := &Source{}
	var acts []SourceAction
	for _, ev := range append([]SourceEvent{Start{MID: "00000000000000aa", Job: "1.1", Home: "1", To: "2", Seq: 1}}, evs...) {
		acts = s.Step(t0, ev)
	}
	return s, acts
}

func dstAfter(evs ...DestEvent) (*Dest, []DestAction) {
	d := &Dest{}
	var acts []DestAction
	for _, ev := range evs {
		now := t0
		if l, ok := ev.(late); ok {
			now, ev = t0.Add(l.after), l.ev
		}
		acts = d.Step(now, ev)
	}
	return d, acts
}

var (
	offer  = Offer{MID: "00000000000000aa", Job: "1.1", From: "1"}
	stream = Stream{MID: "00000000000000aa", Job: "1.1", From: "1", Streamed: true}
)

func want[A any](t *testing.T, what string, acts []A, text string) {
	t.Helper()
	if got := names(acts); got != text {
		t.Errorf("%s: %s, want %s", what, got, text)
	}
}

func TestFaultPoints(t *testing.T) {
	upToSend := []SourceEvent{LocalChecked{}, CheckAnswer{}, Dumped{}}

	// The destination is gone, or the link stalls, while it receives:
	// the source thaws its copy; the destination drops what it has.
	s, acts := srcAfter(append(upToSend, ReadyAnswer{errGone})...)
	want(t, "source, destination gone", acts, "Persist(aborted) Thaw SendAbort NoteHome(ok=false)")
	if s.Err() == nil {
		t.Error("an aborted migration reports no error")
	}
	_, dacts := dstAfter(offer, stream, Received{errStall})
	want(t, "destination, stream cut", dacts, "PersistIn(aborted) Discard Reply(err=true)")

	// A restore error: the destination discards and says so; the source
	// thaws.
	_, dacts = dstAfter(offer, stream, Received{}, Restored{Err: errFailed})
	want(t, "restore error", dacts, "PersistIn(aborted) Discard Reply(err=true)")

	// The commit is lost: the source tries CommitTries times, then leaves
	// it to the destination, which asks after CommitWait and resumes on
	// "committed" — the answer comes from the persisted decision.
	s, _ = srcAfter(append(upToSend, ReadyAnswer{}, CopyGone{})...)
	for i := 1; i < CommitTries; i++ {
		want(t, "commit lost", s.Step(t0, CommitAnswer{errGone}), "Wake(+200ms)")
		want(t, "commit retried", s.Step(t0.Add(RetryEvery), Tick{}), "SendCommit")
	}
	want(t, "commit given up", s.Step(t0, CommitAnswer{errGone}), "NoteHome(ok=true)")
	if got := Answer(s.Record(), true); got != Committed {
		t.Errorf("the source answers %s after a lost commit, want committed", got)
	}
	d, _ := dstAfter(offer, stream, Received{}, Restored{PID: 9})
	want(t, "no commit yet", d.Step(t0.Add(CommitWait-time.Millisecond), Tick{}), "-")
	want(t, "asks", d.Step(t0.Add(CommitWait), Tick{}), "Ask")
	want(t, "resumes", d.Step(t0.Add(CommitWait), Answered{Outcome: Committed}), "PersistIn(committed) Adopt Resume")

	// A duplicated commit is acknowledged and does nothing else.
	d, _ = dstAfter(offer, stream, Received{}, Restored{PID: 9}, CommitMsg{})
	want(t, "commit duplicated", d.Step(t0, CommitMsg{}), "Reply(err=false)")

	// The source crashes after deciding "committed": it never thaws; it
	// kills its copy and commits.
	for _, r := range []Record{{Outcome: Committed}, {Outcome: Committed, Killed: true}} {
		_, acts = Recover(t0, r)
		for _, a := range acts {
			if _, thaw := a.(Thaw); thaw {
				t.Errorf("recovered %+v thaws its copy", r)
			}
		}
	}
	// ... and before deciding: it aborts and thaws.
	_, acts = Recover(t0, Record{Outcome: Pending})
	want(t, "source crash before deciding", acts, "Persist(aborted) Thaw SendAbort NoteHome(ok=false)")

	// The destination crashes before "ready": whatever it restored goes
	// (the source saw no ready and thaws); after "ready": it asks.
	_, dacts = RecoverDest(t0, InRecord{State: DstRestoring})
	want(t, "destination crash before ready", dacts, "PersistIn(aborted) Discard")
	d, dacts = RecoverDest(t0, InRecord{State: DstStopped})
	want(t, "destination crash after ready", dacts, "Ask")

	// The source is unreachable when asked: the copy stays stopped, and
	// the destination asks again, as long as it takes.
	for i := 0; i < 5; i++ {
		at := t0.Add(time.Duration(i) * AskEvery)
		want(t, "source unreachable", d.Step(at, Answered{Err: errDown}), "Wake(+"+(time.Duration(i+1)*AskEvery).String()+")")
		want(t, "asks again", d.Step(at.Add(AskEvery), Tick{}), "Ask")
	}
	if d.State() != DstAsking {
		t.Errorf("after 5 unanswered questions the destination is %s, want asking", d.State())
	}
}

// Notes of two migrations of one job arrive out of order: the home keeps
// the newer.
func TestApplyNoteKeepsTheNewest(t *testing.T) {
	node, seq := ApplyNote("1", 0, true, "3", 2) // the second move's note first
	node, seq = ApplyNote(node, seq, true, "2", 1)
	if node != "3" || seq != 2 {
		t.Errorf("home says %s after %d moves, want 3 after 2", node, seq)
	}
	if n, _ := ApplyNote("3", 2, false, "4", 3); n != "3" {
		t.Errorf("a failed migration moved the record to %s", n)
	}
}

func TestRetention(t *testing.T) {
	r := Record{Outcome: Committed, Killed: true, Acked: true, Noted: true, Started: t0, SettledAt: t0.Add(time.Second)}
	if Expired(r, t0.Add(Retention)) || !Expired(r, t0.Add(time.Second+Retention+1)) {
		t.Error("a settled record is not kept exactly Retention after it settled")
	}
	r.Acked = false // the destination has not confirmed: kept
	if Expired(r, t0.Add(24*time.Hour)) || !Expired(r, t0.Add(MaxAge+1)) {
		t.Error("an unconfirmed commit is not kept until MaxAge")
	}
	in := InRecord{State: DstStopped, Started: t0}
	if DestExpired(in, t0.Add(24*time.Hour)) {
		t.Error("a stopped copy's record expired")
	}
}

// A header from the network names directories: nothing in it may climb
// out of the spool root or name a bad node.
func TestHeaderRefusesPaths(t *testing.T) {
	ok := Header{MID: "00000000000000aa", From: "2", ID: "1.4", Home: "1", HomeAddr: "198.18.0.1:7947"}
	if err := ok.Validate(); err != nil {
		t.Fatalf("a good header: %v", err)
	}
	for name, h := range map[string]Header{
		"climbing id":   {MID: ok.MID, From: "2", ID: "../../../usr/lib/python3.11", Home: "../../../usr/lib/python3", HomeAddr: ok.HomeAddr},
		"slash in home": {MID: ok.MID, From: "2", ID: "a/b.1", Home: "a/b", HomeAddr: ok.HomeAddr},
		"dot home":      {MID: ok.MID, From: "2", ID: "...1", Home: "..", HomeAddr: ok.HomeAddr},
		"bad from":      {MID: ok.MID, From: "../x", ID: "1.4", Home: "1", HomeAddr: ok.HomeAddr},
		"bad mid":       {MID: "../../etc", From: "2", ID: "1.4", Home: "1", HomeAddr: ok.HomeAddr},
		"bad mount":     {MID: ok.MID, From: "2", ID: "1.4", Home: "1", HomeAddr: ok.HomeAddr, Mounts: []string{"/a/../b"}},
	} {
		if err := h.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
