package agent

import (
	"testing"

	"roam/internal/agent/reopen"
	"roam/internal/api"
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
