package agent

// Fuzz targets of the agent (their harness is fuzz_test.go):
// The peer routes of checkpoints and restarts.

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/agent/reopen"
	"roam/internal/job"
	"roam/internal/migrate"
)

// ---- checkpoints and restarts ----

var fzRestartRoutes = []string{"/v1/peer/ckpt/take", "/v1/peer/ckpt/restore", "/v1/peer/reopen", "/v1/peer/reopen/done", "/v1/peer/reopen/commit",
	"/v1/peer/ckpt/preempt"}

// FuzzPeerRestart feeds the JSON bodies of the checkpoint and restart
// routes: no panic, no 500, and a running job is never consented a
// restart unless the caller names its node dead (never two copies). A
// preemption asked is judged by the node, its fields bounded.
func FuzzPeerRestart(f *testing.F) {
	meta := migrate.CheckpointMeta{Version: 1, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Node: "n3", Out: 5,
		Job: migrate.CheckpointJob{Argv: []string{"/bin/true"}, Cwd: "/", Group: fzHome}}
	f.Add(uint8(0), fzJSON(f, peer.CheckpointRequest{ID: fzLocal}))
	f.Add(uint8(0), fzJSON(f, peer.CheckpointRequest{ID: "../x.1", Stop: true}))
	f.Add(uint8(1), fzJSON(f, reopen.Target{ID: fzHome, Home: "n2", On: "n1", Why: "roam restart"}))
	f.Add(uint8(2), fzJSON(f, reopen.Request{MID: fzMID, ID: fzHome, Meta: meta, Why: "roam restart"}))
	f.Add(uint8(2), fzJSON(f, reopen.Request{MID: fzMID, ID: fzOver, Meta: meta, Why: "roam restart"}))
	f.Add(uint8(2), fzJSON(f, reopen.Request{MID: fzMID, ID: fzLost, Meta: meta, Lost: "n3", Why: "node n3 was declared dead"}))
	f.Add(uint8(3), fzJSON(f, reopen.Failed{MID: fzMID, ID: fzOver, Inc: 1, Error: "x"}))
	f.Add(uint8(4), fzJSON(f, reopen.Commit{MID: fzMID, ID: fzOver}))
	f.Add(uint8(5), fzJSON(f, peer.PreemptRequest{Home: "n1", IDs: []string{fzLocal}, Max: 1, After: time.Second, NeedMB: 64}))
	f.Add(uint8(5), fzJSON(f, peer.PreemptRequest{Home: "n2", IDs: []string{fzLocal, "../x.1"}, Max: 3, After: time.Millisecond, NeedMB: -1, RoomMB: 1e300}))
	pool := newFzPool(f)
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		path := fzRestartRoutes[int(route)%len(fzRestartRoutes)]
		a := pool.get(t)
		running := map[string]job.Record{}
		for id, r := range a.jobs.Homes() {
			if r.State == job.StateRunning || r.State == job.StateStarting {
				running[id] = r
			}
		}
		w := a.call(http.MethodPost, path, body)
		if w.Code >= 500 && w.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s: status %d: %s", path, w.Code, w.Body)
		}
		var req reopen.Request
		if path != "/v1/peer/reopen" || json.Unmarshal(body, &req) != nil {
			return
		}
		for id, b := range running {
			r, err := a.jobs.HomeRecord(id)
			if err == nil && r.Inc != b.Inc && (req.Lost == "" || req.Lost != b.Node) {
				t.Fatalf("job %s, running on %s, consented a restart (%+v) with lost %q", id, b.Node, r.Restarts, req.Lost)
			}
		}
	})
}
