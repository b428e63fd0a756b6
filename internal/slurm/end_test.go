package slurm

import (
	"testing"
	"time"
)

// A job's end time is read from scontrol's line of that job, in the
// location given; a job with no end yet has none; another job's line is
// not read for it.
func TestEndTime(t *testing.T) {
	loc := time.FixedZone("X", 3600)
	out := "JobId=41 JobName=a UserId=u(70701) EndTime=2026-11-29T15:00:00 Partition=main\nJobId=4 JobName=b c UserId=u(70701) JobState=RUNNING EndTime=2026-11-29T14:40:05 Partition=main\n"
	end, ok, err := EndTime(out, "4", loc)
	if want := time.Date(2026, 11, 29, 14, 40, 5, 0, loc); err != nil || !ok || !end.Equal(want) {
		t.Fatalf("EndTime = %v %v %v, want %v", end, ok, err, want)
	}
	if _, ok, err := EndTime("JobId=5 EndTime=Unknown\n", "5", loc); ok || err != nil {
		t.Errorf("Unknown: %v %v", ok, err)
	}
	if _, _, err := EndTime(out, "9", loc); err == nil {
		t.Error("a job scontrol did not report")
	}
	if _, _, err := EndTime("JobId=5 EndTime=tomorrow\n", "5", loc); err == nil {
		t.Error("an EndTime that is not a time")
	}
}
