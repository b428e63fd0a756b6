package limits

import (
	"roam/internal/job"
	"slices"
	"strings"
	"testing"
	"time"
)

// Which ended jobs a home removes: past the age, or past the count per
// user (the oldest first); never a running one.
func TestLimitsExpired(t *testing.T) {
	now := time.Date(2026, 1, 10, 0, 0, 0, 0, time.UTC)
	l := Default()
	l.KeepFinished, l.KeepFinishedPerUser = 48*time.Hour, 2
	code := 0
	rec := func(id string, uid uint32, state string, ago time.Duration) job.Record {
		r := job.Record{ID: id, UID: uid, State: state}
		switch state {
		case job.StateFinished:
			r.Ended, r.ExitCode = now.Add(-ago), &code
		case job.StateLost:
			r.LostAt = now.Add(-ago)
		}
		return r
	}
	recs := []job.Record{
		rec("n1.1", 1, job.StateFinished, 72*time.Hour), // too old
		rec("n1.2", 1, job.StateFinished, 3*time.Hour),  // third newest of user 1
		rec("n1.3", 1, job.StateFinished, 2*time.Hour),
		rec("n1.4", 1, job.StateLost, time.Hour),
		rec("n1.5", 1, job.StateRunning, 0),
		rec("n1.6", 2, job.StateFinished, 47*time.Hour),
		rec("n1.7", 2, job.StateLost, 49*time.Hour), // too old
	}
	got := strings.Join(l.Expired(recs, now), ",")
	if want := "n1.1,n1.2,n1.7"; got != want {
		t.Fatalf("expired %s, want %s", got, want)
	}
}

// TestReserveVictims checks whom a node kills to win back its state
// disk's reserve: the largest users' jobs until they cover what is
// short, and nobody while the
// reserve is whole, the free space unknown, or the jobs' output too
// small to matter.
func TestReserveVictims(t *testing.T) {
	l := Default()
	l.DiskReserveBytes = 100
	used := map[uint32]int64{1: 50, 2: 30, 3: 5, 4: 0}
	for _, c := range []struct {
		free int64
		want []uint32
	}{
		{free: 100, want: nil},           // whole
		{free: -1, want: nil},            // unknown
		{free: 60, want: []uint32{1}},    // 40 short: user 1's 50 covers it
		{free: 30, want: []uint32{1, 2}}, // 70 short: 50 + 30
		{free: 10, want: nil},            // 90 short, 85 of output: something else fills the disk
		{free: 15, want: []uint32{1, 2, 3}},
	} {
		got := l.ReserveVictims(c.free, used)
		if !slices.Equal(got, c.want) {
			t.Errorf("free %d: %v, want %v", c.free, got, c.want)
		}
		if short := l.DiskShort(c.free, 0); (short == nil) != (c.free >= 100 || c.free < 0) || short != nil && !strings.Contains(short.Error(), "limits.disk_reserve_bytes") {
			t.Errorf("free %d: DiskShort %v", c.free, short)
		}
	}
	if l.DiskShort(150, 40) != nil || l.DiskShort(150, 60) == nil {
		t.Error("DiskShort does not count the bytes to be written")
	}
	l.DiskReserveBytes = 0
	if l.ReserveVictims(0, used) != nil || l.DiskShort(0, 0) != nil {
		t.Error("a reserve of 0 kills or refuses")
	}
}

// TestWatchClosely: a node looks at its state disk between holds while
// it has less than twice its reserve free, or when, at its last fall's
// rate, 8 hold periods would use up the room above the reserve or what
// the user with the most output there has left of the budget; not for a
// disk that stands still or fills slowly while users are far from it,
// nor one it cannot read.
func TestWatchClosely(t *testing.T) {
	const mib = 1 << 20
	l := Limits{DiskReserveBytes: 128 * mib, OutputBytesPerUser: 16 * mib}
	for _, tc := range []struct {
		free, perHold, room int64
		want                bool
	}{
		{-1, 100 * mib, 16 * mib, false},      // unknown
		{1 << 40, 0, 16 * mib, false},         // roomy, still
		{1 << 40, 2*mib - 1, 16 * mib, false}, // 8 periods: under the budget
		{1 << 40, 2 * mib, 16 * mib, true},    // 8 periods: the budget
		{1 << 40, mib / 8, mib, true},         // a user with 1 MiB left
		{1 << 40, 0, mib, false},              // … and a still disk
		{1 << 40, 0, 0, true},                 // a user at the budget
		{1 << 40, 0, -mib, true},              // or past it
		{300 * mib, 0, 16 * mib, false},       // still, above twice the reserve
		{255 * mib, 0, 16 * mib, true},        // under twice the reserve
		{260 * mib, 17 * mib, 1 << 40, true},  // 8 periods: past the 132 MiB above the reserve
		{260 * mib, 16 * mib, 1 << 40, false}, // … and short of them
	} {
		if got := l.WatchClosely(tc.free, tc.perHold, tc.room); got != tc.want {
			t.Errorf("WatchClosely(%d MiB free, %d B a hold, %d B of room) = %v, want %v", tc.free/mib, tc.perHold, tc.room, got, tc.want)
		}
	}
}

// TestHomeOutputShort: a home writes no output into the last half of its
// disk's reserve; a disk it cannot read never stops it.
func TestHomeOutputShort(t *testing.T) {
	l := Limits{DiskReserveBytes: 100}
	for _, tc := range []struct {
		free, more int64
		want       bool
	}{{-1, 1 << 40, false}, {1000, 0, false}, {60, 10, false}, {60, 11, true}, {49, 0, true}} {
		if got := l.HomeOutputShort(tc.free, tc.more); got != tc.want {
			t.Errorf("HomeOutputShort(%d free, %d more) = %v, want %v", tc.free, tc.more, got, tc.want)
		}
	}
}
