package cli

import (
	"roam/internal/api"
	"strings"
	"syscall"
	"testing"
)

// roam kill -s takes every signal the kernel knows, as kill(1) names it.
func TestParseSignal(t *testing.T) {
	for in, want := range map[string]int{
		"TERM": int(syscall.SIGTERM), "9": 9, "PIPE": int(syscall.SIGPIPE), "sigpipe": int(syscall.SIGPIPE),
		"SIGWINCH": int(syscall.SIGWINCH), "xcpu": int(syscall.SIGXCPU), "IOT": int(syscall.SIGABRT), "CLD": int(syscall.SIGCHLD),
		"RTMIN": 34, "RTMIN+3": 37, "SIGRTMAX": 64, "RTMAX-2": 62, "64": 64, "1": 1,
	} {
		if got, err := parseSignal(in); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "0", "65", "-1", "NOPE", "RTMIN+31", "RTMIN-1", "RTMAX+1", "RTMIN3", "SIG"} {
		if got, err := parseSignal(bad); err == nil || !strings.Contains(err.Error(), "is not a signal") {
			t.Errorf("%q: %d %v, want refused", bad, got, err)
		}
	}
}

// roam ps JOBID... and its filters keep what was asked for and name the
// jobs it cannot list.
func TestFilterJobs(t *testing.T) {
	js := []api.Job{
		{ID: "1.1", UID: 70001, Node: "1", State: api.StateRunning},
		{ID: "1.2", UID: 70001, Node: "2", State: api.StateFinished},
		{ID: "2.1", UID: 70002, Node: "2", State: api.StateRunning},
	}
	ids := func(js []api.Job) string {
		var out []string
		for _, j := range js {
			out = append(out, j.ID)
		}
		return strings.Join(out, " ")
	}
	for _, tc := range []struct {
		ids               []string
		state, user, node string
		want, wantMissing string
	}{
		{nil, "", "", "", "1.1 1.2 2.1", ""},
		{[]string{"1.2", "9.9"}, "", "", "", "1.2", "9.9"},
		{nil, api.StateRunning, "", "", "1.1 2.1", ""},
		{nil, "", "70002", "", "2.1", ""},
		{nil, "", "", "2", "1.2 2.1", ""},
		{[]string{"1.1", "2.1"}, "", "", "2", "2.1", ""},
	} {
		got, missing, err := filterJobs(js, tc.ids, tc.state, tc.user, tc.node)
		if err != nil || ids(got) != tc.want || strings.Join(missing, " ") != tc.wantMissing {
			t.Errorf("%+v: %q missing %q %v", tc, ids(got), missing, err)
		}
	}
	if _, _, err := filterJobs(js, nil, "sleeping", "", ""); err == nil || !strings.Contains(err.Error(), "--state") {
		t.Errorf("a state that is none: %v", err)
	}
}
