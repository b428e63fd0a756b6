package sweep

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// A job's states, as the API names them (api.State*): this package
// cannot import the API's client, and a test holds them equal.
const (
	Pending  = "pending" // recorded at its home, waiting to start
	Starting = "starting"
	Running  = "running"
	Finished = "finished"
	Lost     = "lost"
)

// State is what Release reads of one sweep at its home.
type State struct {
	// MaxRunning bounds the sweep's jobs starting or running at once (roam
	// run --max-running); 0 is no bound.
	MaxRunning int
	// Running counts its jobs starting or running (stopped ones too: they
	// hold their memory, and roam kill -s CONT goes on with them).
	Running int
	// Pending are its pending indices, in any order.
	Pending []int
}

// Release is the pending indices of a sweep that its --max-running lets
// start now, the lowest first: a new run's first starts. Whether they
// have room, and when the others start, is the home's queue's to say
// (package queue, which holds each sweep to the same bound).
func Release(s State) []int {
	n := len(s.Pending)
	if s.MaxRunning > 0 {
		n = min(n, max(s.MaxRunning-s.Running, 0))
	}
	if n <= 0 {
		return nil
	}
	idx := append([]int(nil), s.Pending...)
	sort.Ints(idx)
	return idx[:n]
}

// Member is what a summary reads of one job of a sweep.
type Member struct {
	Index int
	State string
	// Exit is its exit status once finished (128+S when killed by S).
	Exit *int
}

// Summary is how a sweep's indices stand: those that ended with 0, those
// that ended with another status (by status), those lost with their
// node, and those not ended yet.
type Summary struct {
	Jobs, OK int
	// Failed are the indices that exited non-zero, by exit status.
	Failed map[int][]int
	Lost   []int
	// Pending and Running count the jobs not ended (starting ones among
	// the running).
	Pending, Running int
}

// Summarize sums up a sweep's members.
func Summarize(ms []Member) Summary {
	s := Summary{Jobs: len(ms), Failed: map[int][]int{}}
	sorted := append([]Member(nil), ms...)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Index < sorted[j].Index })
	for _, m := range sorted {
		switch {
		case m.State == Finished && m.Exit != nil && *m.Exit == 0:
			s.OK++
		case m.State == Finished && m.Exit != nil:
			s.Failed[*m.Exit] = append(s.Failed[*m.Exit], m.Index)
		case m.State == Finished:
			s.Failed[-1] = append(s.Failed[-1], m.Index)
		case m.State == Lost:
			s.Lost = append(s.Lost, m.Index)
		case m.State == Pending:
			s.Pending++
		default:
			s.Running++
		}
	}
	return s
}

// Ended says whether every job of the sweep has ended.
func (s Summary) Ended() bool { return s.Pending == 0 && s.Running == 0 }

// Again are the indices a rerun starts again: those failed and lost.
func (s Summary) Again() []int {
	var out []int
	for _, idx := range s.Failed {
		out = append(out, idx...)
	}
	out = append(out, s.Lost...)
	sort.Ints(out)
	return out
}

// String is the summary in one line: "10 jobs: 7 ok, 2 failed (exit 1:
// 1,3; exit 143: 7), 1 lost (5)", with the jobs not ended yet when there
// are some.
func (s Summary) String() string {
	var failed int
	codes := make([]int, 0, len(s.Failed))
	for c, idx := range s.Failed {
		failed += len(idx)
		codes = append(codes, c)
	}
	sort.Ints(codes)
	parts := []string{fmt.Sprintf("%d ok", s.OK)}
	f := fmt.Sprintf("%d failed", failed)
	if failed > 0 {
		var by []string
		for _, c := range codes {
			st := "exit " + strconv.Itoa(c)
			if c < 0 {
				st = "no exit status"
			}
			by = append(by, st+": "+Ranges(s.Failed[c]))
		}
		f += " (" + strings.Join(by, "; ") + ")"
	}
	parts = append(parts, f)
	l := fmt.Sprintf("%d lost", len(s.Lost))
	if len(s.Lost) > 0 {
		l += " (" + Ranges(s.Lost) + ")"
	}
	parts = append(parts, l)
	if s.Running > 0 {
		parts = append(parts, fmt.Sprintf("%d running", s.Running))
	}
	if s.Pending > 0 {
		parts = append(parts, fmt.Sprintf("%d pending", s.Pending))
	}
	return fmt.Sprintf("%d jobs: %s", s.Jobs, strings.Join(parts, ", "))
}
