package launch

import (
	"strings"
	"testing"
)

func TestJobEnvReplacesTheCallersRoamVariables(t *testing.T) {
	got := jobEnv([]string{"PATH=/bin", "ROAM_INDEX=7", "HOME=/root", "ROAM_COUNT=9", "ROAM_JOB=x"}, "3.12", "", 2, 5)
	want := []string{"PATH=/bin", "HOME=/root", "ROAM_JOB=3.12", "ROAM_INDEX=2", "ROAM_COUNT=5"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("jobEnv = %q, want %q", got, want)
	}
}
