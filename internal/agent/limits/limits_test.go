package limits

import (
	"roam/internal/job"
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
