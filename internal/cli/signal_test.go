package cli

import (
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
