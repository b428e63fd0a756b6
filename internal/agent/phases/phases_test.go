package phases

import (
	"strings"
	"testing"
	"time"

	"roam/internal/api"
)

// The other node's steps are taken under known names only, as its side,
// and none is taken from an answer with too many or a time out of range.
func TestTheirs(t *testing.T) {
	got := Theirs([]api.Phase{{Name: "receive", MS: 3, Side: "x"}, {Name: strings.Repeat("n", 9), MS: 1}}, api.SideDest)
	if len(got) != 2 || got[0].Name != "receive" || got[1].Name != "other" || got[0].Side != api.SideDest || got[1].Side != api.SideDest {
		t.Fatalf("Theirs = %+v", got)
	}
	if got := Theirs(make([]api.Phase, maxTheirs+1), api.SideDest); got != nil {
		t.Fatalf("%d steps taken, past the bound of %d", len(got), maxTheirs)
	}
	if got := Theirs([]api.Phase{{Name: "receive", MS: -1}}, api.SideDest); got != nil {
		t.Fatalf("a negative time taken: %+v", got)
	}
}

// A call's own time is what the other node's steps do not account for,
// and their steps count as frozen only while the job is stopped here.
func TestAddCall(t *testing.T) {
	l := Log{Side: api.SideSource, Frozen: true}
	l.AddCall("commit", time.Now().Add(-100*time.Millisecond), []api.Phase{{Name: "resume", MS: 40, Frozen: true}, {Name: "discard", MS: 10}})
	if len(l.List) != 3 {
		t.Fatalf("steps = %+v", l.List)
	}
	if own := l.List[0].MS; own < 45 || own > 1000 {
		t.Errorf("the call's own part is %v ms, want about 50", own)
	}
	if !l.List[1].Frozen || l.List[2].Frozen {
		t.Errorf("frozen steps = %+v", l.List)
	}
	if l.FrozenMS() < l.List[0].MS+40 {
		t.Errorf("FrozenMS = %v, want the call and the resume", l.FrozenMS())
	}
}
