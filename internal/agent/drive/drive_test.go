package drive

import (
	"slices"
	"testing"
)

// Loop carries out a step's actions in order, steps the machine with the
// events they answered in the order they came (each step's actions
// before the next event's), and carries out nothing once halted says so.
func TestLoopStepsEachAnswerInTurn(t *testing.T) {
	// The machine: event n decides actions "na" and "nb"; action "na" is
	// answered by event 2n and "nb" by 2n+1, while that is under 6: 1
	// leads to 2 and 3, 2 to 4 and 5, and 3, 4 and 5 to none.
	step := func(ev int) []string { return []string{string(rune('0'+ev)) + "a", string(rune('0'+ev)) + "b"} }
	for _, c := range []struct {
		haltAfter int // actions carried out before halted says so; -1: never
		want      []string
		finished  bool
	}{
		{-1, []string{"1a", "1b", "2a", "2b", "3a", "3b", "4a", "4b", "5a", "5b"}, true},
		{3, []string{"1a", "1b", "2a"}, false},
	} {
		var done []string
		do := func(act string) (int, bool) {
			done = append(done, act)
			ev := int(act[0]-'0') * 2
			if act[1] == 'b' {
				ev++
			}
			return ev, ev < 6
		}
		halted := func() bool { return c.haltAfter >= 0 && len(done) >= c.haltAfter }
		if got := Loop(step(1), step, do, halted); got != c.finished || !slices.Equal(done, c.want) {
			t.Errorf("halt after %d: carried out %v, finished %v; want %v, %v", c.haltAfter, done, got, c.want, c.finished)
		}
	}
}
