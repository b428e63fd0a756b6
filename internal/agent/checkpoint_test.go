package agent

import (
	"testing"

	"roam/internal/agent/reopen"
	"roam/internal/api"
	"roam/internal/job"
)

func TestRestartable(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    *api.Checkpoint
		want bool
	}{
		{"none", nil, false},
		{"kept on a live node", &api.Checkpoint{OK: true, StoredOn: "n1"}, true},
		{"kept on the dead node itself", &api.Checkpoint{OK: true, StoredOn: "n2"}, false},
		{"kept on another node that looks dead", &api.Checkpoint{OK: true, StoredOn: "n4"}, true},
		{"handed to the user", &api.Checkpoint{OK: true}, false},
		{"failed", &api.Checkpoint{StoredOn: "n1"}, false},
	} {
		if got := reopen.Restartable(tc.c, "n2"); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// A job roam lost (its fence killed it, or a dump of it failed, with no
// checkpoint kept to restart it from) may be restarted from its owner's
// file, as the end reason it carries says; one root or a limit ended may
// not. The chaos run's owner was refused ("ended by root or a limit")
// once fence kills carried their reason.
func TestRevivable(t *testing.T) {
	for _, c := range []struct {
		why string
		ok  bool
	}{
		{"", true},
		{reopen.StoppedToRestart, true},
		{api.EndFenced, true},
		{api.EndDumpFailed, true},
		{reopen.EndedByRoot(9), false},
		{"killed: its output passed 1 GiB (limits.output_bytes)", false},
	} {
		r := job.Record{ID: "n1.1", State: job.StateFinished, EndReason: c.why}
		if err := reopen.Revivable(r); (err == nil) != c.ok {
			t.Errorf("ended %q: %v, want revivable %v", c.why, err, c.ok)
		}
	}
}
