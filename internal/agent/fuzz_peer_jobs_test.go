package agent

// Fuzz targets of the agent (their harness is fuzz_test.go):
// The peer routes of jobs: start, updates, signals, notes.

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/netip"
	"os"
	"reflect"
	"strings"
	"testing"

	"roam/internal/agent/peer"
	"roam/internal/agent/relay"
	"roam/internal/api"
	"roam/internal/job"
	"roam/internal/migrate"
)

// ---- peer port: jobs ----

// FuzzPeerStart: /v1/peer/start answers every spec, and only specs whose
// id is HOME.SEQ of the requester's home (a node id), with a home address
// that is one, reach the node's launcher: a spool directory or cgroup
// named by the id stays where it belongs.
func FuzzPeerStart(f *testing.F) {
	spec := job.Spec{ID: "n1.7", UID: 1000, GID: 1000, Argv: []string{"/bin/sleep", "100"}, Env: []string{"HOME=/home/u"}, Cwd: "/home/u"}
	f.Add(fzJSON(f, peer.StartRequest{Home: "n1", HomeAddr: "10.0.0.1:7947", Jobs: []job.Spec{spec}}))
	two := spec
	two.ID, two.Pin, two.Stdin = "n1.8", true, true
	f.Add(fzJSON(f, peer.StartRequest{Home: "n1", HomeAddr: "[fd00::1]:7947", Jobs: []job.Spec{spec, two}}))
	for _, id := range []string{"../../evil.1", "n1/../../evil.1", "n2.1", ".n1.1", "n1.-1", "n1.1 ", "n1.", "n1..1"} {
		bad := spec
		bad.ID = id
		f.Add(fzJSON(f, peer.StartRequest{Home: "n1", HomeAddr: "10.0.0.1:7947", Jobs: []job.Spec{bad}}))
	}
	f.Add(fzJSON(f, peer.StartRequest{Home: "..", HomeAddr: "10.0.0.1:7947", Jobs: []job.Spec{{ID: "...1"}}}))
	f.Add(fzJSON(f, peer.StartRequest{Home: "n1", HomeAddr: "../x", Jobs: []job.Spec{spec}}))
	f.Add([]byte(`{"home":"n1","home_addr":"10.0.0.1:1","jobs":[{"id":"n1.1"}]} trailing`))
	f.Add([]byte(`{"jobs":null}`))
	f.Add([]byte(`[`))
	pool := newFzPool(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		a := pool.get(t)
		w := a.call(http.MethodPost, "/v1/peer/start", body)
		fzStatus(t, w, "start")
		var req peer.StartRequest
		if !fzDecode(body, &req) {
			if w.Code != http.StatusBadRequest {
				t.Fatalf("a body that does not decode answered %d", w.Code)
			}
			return
		}
		var res []peer.StartResult
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &res) != nil || len(res) != len(req.Jobs) {
			t.Fatalf("%d specs answered %d: %s", len(req.Jobs), w.Code, w.Body)
		}
		for _, s := range a.node.started {
			if !fzNodeID.MatchString(req.Home) || !fzSafeJobID(s.ID) || !strings.HasPrefix(s.ID, req.Home+".") {
				t.Fatalf("job %q of home %q reached the launcher", s.ID, req.Home)
			}
			if _, err := netip.ParseAddrPort(req.HomeAddr); err != nil {
				t.Fatalf("job %q started for home address %q", s.ID, req.HomeAddr)
			}
		}
	})
}

// FuzzPeerUpdates: /v1/peer/updates acks every job of this home it was
// told of, and none of another home's (its node keeps it, and sends it
// to its home), with offsets that are never negative; a job's output grows only by what an
// update carried, at its offset; a job ends only with an exit from its
// news; "gone" is said only of a job of this home that it has no record
// of.
func FuzzPeerUpdates(f *testing.F) {
	exit := 3
	f.Add(fzJSON(f, []relay.Update{{ID: fzHome, Node: "n3", OutOff: 6, Out: []byte("world\n"), ErrOff: 0}}))
	f.Add(fzJSON(f, []relay.Update{{ID: fzHome, Node: "n3", OutOff: 6, ErrOff: 0, Exit: &exit, FinalOut: 6, FinalErr: 0}}))
	f.Add(fzJSON(f, []relay.Update{{ID: fzHome, Node: "n3", OutOff: 2, Out: []byte("llo\nagain"), ErrOff: 0, Err: []byte("e")}}))
	f.Add(fzJSON(f, []relay.Update{{ID: fzHome, OutOff: -1, ErrOff: -1}}))
	f.Add(fzJSON(f, []relay.Update{{ID: fzLost, Node: "n4", OutOff: 0, Out: []byte("back")}}))
	f.Add(fzJSON(f, []relay.Update{{ID: fzOver, Node: "n3", OutOff: 0, Exit: &exit}}))
	f.Add(fzJSON(f, []relay.Update{{ID: "n2.99", Node: "n3"}, {ID: "n1.99", Node: "n3"}, {ID: "../n2.1", Node: "n3"}}))
	f.Add(fzJSON(f, []relay.Update{{ID: fzHome, OutOff: 9223372036854775807, Out: []byte("x")}, {ID: fzHome, OutOff: 100, Out: []byte("gap")}}))
	f.Add([]byte(`[{"id":"n2.1","out_off":0,"out":"not base64"}]`))
	f.Add([]byte(`{}`))
	pool := newFzPool(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		a := pool.get(t)
		before, _ := os.ReadFile(a.seededOutput())
		w := a.call(http.MethodPost, "/v1/peer/updates", body)
		fzStatus(t, w, "updates")
		var ups []relay.Update
		if !fzDecode(body, &ups) {
			return
		}
		var acks map[string]relay.Ack
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &acks) != nil {
			t.Fatalf("answered %d: %s", w.Code, w.Body)
		}
		exits := map[string]bool{}
		var sent [][]byte
		homes := a.jobs.Homes()
		for _, u := range ups {
			k, ok := acks[u.ID]
			_, had := homes[u.ID]
			h, _ := migrate.JobHome(u.ID)
			mine := h == fzSelf
			switch {
			case ok != mine:
				t.Fatalf("ack for %q: %v", u.ID, ok)
			case k.Out < 0 || k.Err < 0:
				t.Fatalf("ack %+v for %q", k, u.ID)
			case k.Gone && (had || !mine):
				t.Fatalf("%q said gone", u.ID)
			}
			if u.Exit != nil {
				exits[u.ID] = true
			}
			if u.ID == fzHome {
				sent = append(sent, u.Out)
			}
		}
		for id, r := range homes {
			if r.State == job.StateFinished && id != fzOver && !exits[id] {
				t.Fatalf("job %s finished without an exit in its news", id)
			}
		}
		after, _ := os.ReadFile(a.seededOutput())
		if !bytes.HasPrefix(after, before) {
			t.Fatalf("output %q became %q", before, after)
		}
		for added := after[len(before):]; len(added) > 0; {
			found := false
			for _, s := range sent {
				for i := 0; i < len(s) && !found; i++ {
					if bytes.HasPrefix(added, s[i:]) {
						added, found = added[len(s)-i:], true
					}
				}
			}
			if !found {
				t.Fatalf("output grew by %q, which no update carried", added)
			}
		}
	})
}

// FuzzPeerSignal: /v1/peer/signal delivers only a signal of 1 to 64, and
// only to a job that runs here.
func FuzzPeerSignal(f *testing.F) {
	f.Add(fzJSON(f, peer.SignalRequest{ID: fzLocal, Signal: 15}))
	f.Add(fzJSON(f, peer.SignalRequest{ID: fzPinned, Signal: 9}))
	f.Add(fzJSON(f, peer.SignalRequest{ID: fzLocal, Signal: 64}))
	f.Add(fzJSON(f, peer.SignalRequest{ID: fzLocal, Signal: 0}))
	f.Add(fzJSON(f, peer.SignalRequest{ID: fzLocal, Signal: 65}))
	f.Add(fzJSON(f, peer.SignalRequest{ID: fzLocal, Signal: -9}))
	f.Add(fzJSON(f, peer.SignalRequest{ID: "n1.404", Signal: 15}))
	f.Add([]byte(`{"id":"n1.5","signal":4294967311}`))
	pool := newFzPool(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		a := pool.get(t)
		w := a.call(http.MethodPost, "/v1/peer/signal", body)
		fzStatus(t, w, "signal")
		var req peer.SignalRequest
		ok := fzDecode(body, &req)
		for _, s := range a.node.signals {
			if !ok || s.sig < 1 || s.sig > 64 || int(s.sig) != req.Signal || s.pid != fzPID || req.ID != fzLocal {
				t.Fatalf("signal %d to pid %d delivered for %q", s.sig, s.pid, body)
			}
		}
		if ok && (req.Signal < 1 || req.Signal > 64) && w.Code != http.StatusBadRequest {
			t.Fatalf("signal %d answered %d", req.Signal, w.Code)
		}
	})
}

// FuzzPeerNote: /v1/peer/note changes only a record of this home; its
// migrations never go back, its log stays bounded and holds a migration
// once, and a finished job stays finished where it was (a lost one may
// come back: docs/security.md).
func FuzzPeerNote(f *testing.F) {
	yes, no := true, false
	f.Add(fzJSON(f, relay.Note{ID: fzHome, Migration: &api.Migration{MID: "00000000000000bb", Seq: 3, From: "n3", To: "n4", OK: true}}))
	f.Add(fzJSON(f, relay.Note{ID: fzHome, Migration: &api.Migration{MID: fzMID, Seq: 9, From: "n3", To: "n5", OK: true}}))
	f.Add(fzJSON(f, relay.Note{ID: fzHome, Migration: &api.Migration{MID: "00000000000000cc", Seq: 1, From: "n3", To: "n4"}, PinReason: "holds /tmp/x"}))
	f.Add(fzJSON(f, relay.Note{ID: fzLost, Migration: &api.Migration{MID: "00000000000000dd", Seq: 1, To: "n5", OK: true}}))
	f.Add(fzJSON(f, relay.Note{ID: fzOver, Node: "n9", Manual: &yes}))
	f.Add(fzJSON(f, relay.Note{ID: fzHome, Node: "n9", Manual: &no}))
	f.Add(fzJSON(f, relay.Note{ID: "n1.1", Node: "n9"}))
	f.Add(fzJSON(f, relay.Note{ID: fzHome, Migration: &api.Migration{Seq: -5, OK: true, To: "../x"}}))
	pool := newFzPool(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		a := pool.get(t)
		before := a.jobs.Homes()
		w := a.call(http.MethodPost, "/v1/peer/note", body)
		fzStatus(t, w, "note")
		var n relay.Note
		fzDecode(body, &n)
		for id, r := range a.jobs.Homes() {
			b := before[id]
			switch {
			case id != n.ID && !reflect.DeepEqual(r, b):
				t.Fatalf("a note of %q changed job %s", n.ID, id)
			case r.Migrations < b.Migrations:
				t.Fatalf("job %s: migrations went from %d to %d", id, b.Migrations, r.Migrations)
			case len(r.MigrationLog) > job.MaxMigrationLog:
				t.Fatalf("job %s: %d migrations logged", id, len(r.MigrationLog))
			case b.State == job.StateFinished && (r.Node != b.Node || r.State != b.State):
				t.Fatalf("finished job %s now %s on %q", id, r.State, r.Node)
			}
			seen := map[string]bool{}
			for _, m := range r.MigrationLog {
				if m.MID != "" && seen[m.MID] {
					t.Fatalf("job %s: migration %s logged twice", id, m.MID)
				}
				seen[m.MID] = true
			}
		}
	})
}
