package slurm

import (
	"fmt"
	"strings"
	"time"
)

// endLayout is how scontrol prints a time (EndTime=2026-11-29T14:40:00),
// in the controller's local time.
const endLayout = "2006-01-02T15:04:05"

// EndTime reads job id's end time from `scontrol show job -o ID`: when
// Slurm ends it at its time limit, read in loc (scontrol's local time).
// ok is false for a job with no end time yet (EndTime=Unknown, a pending
// job) or none (an unlimited one, which scontrol prints a year far
// ahead: still a time, and never near).
func EndTime(out, id string, loc *time.Location) (end time.Time, ok bool, err error) {
	if len(out) > MaxLine {
		return time.Time{}, false, fmt.Errorf("scontrol: %d bytes of output, more than %d", len(out), MaxLine)
	}
	for _, l := range strings.Split(out, "\n") {
		if !strings.HasPrefix(l, "JobId="+id+" ") {
			continue
		}
		for _, kv := range fields(strings.TrimSpace(l)) {
			k, v, _ := strings.Cut(kv, "=")
			if k != "EndTime" {
				continue
			}
			if v == "Unknown" || v == "None" {
				return time.Time{}, false, nil
			}
			t, err := time.ParseInLocation(endLayout, v, loc)
			if err != nil {
				return time.Time{}, false, fmt.Errorf("scontrol: EndTime %q: %w", trim(v), err)
			}
			return t, true, nil
		}
		return time.Time{}, false, nil
	}
	return time.Time{}, false, refuse("job %s: scontrol reports no such job", id)
}
