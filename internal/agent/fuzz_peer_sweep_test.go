package agent

import (
	"encoding/json"
	"net/http"
	"net/url"
	"reflect"
	"testing"

	"roam/internal/agent/control"
	"roam/internal/agent/peer"
	"roam/internal/job"
)

// fzSeedPending puts a pending job of A's sweep fzSweep in a's table.
func fzSeedPending(a *fzAgent) {
	a.jobs.Seed([]job.Record{{ID: fzPend, UID: 1000, GID: 1000, User: "u", Argv: []string{"/bin/sleep", "1000"}, Cwd: "/", Home: fzSelf,
		State: job.StatePending, Started: fzStarted, Group: fzPend, Sweep: job.SweepPart{ID: fzSweep, Count: 1, MaxRunning: 1}}}, nil)
}

// FuzzPeerCancel: /v1/peer/cancel ends only pending jobs of this home,
// each with 128 and the signal, and only for a signal that ends a
// program by default; every other record stays as it was, and a signal
// goes only to a job that runs.
func FuzzPeerCancel(f *testing.F) {
	f.Add(fzJSON(f, peer.CancelRequest{IDs: []string{fzPend}, Signal: 15}))
	f.Add(fzJSON(f, peer.CancelRequest{IDs: []string{fzPend, fzHome, fzOver, "n1.404", fzPend}, Signal: 9}))
	f.Add(fzJSON(f, peer.CancelRequest{IDs: []string{fzPend}, Signal: 0}))
	f.Add(fzJSON(f, peer.CancelRequest{IDs: []string{fzPend}, Signal: 65}))
	f.Add(fzJSON(f, peer.CancelRequest{IDs: []string{fzPend}, Signal: 18}))
	f.Add([]byte(`{"ids":["n2.18446744073709551614"],"signal":4294967311}`))
	pool := newFzPool(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		a := pool.get(t)
		fzSeedPending(a)
		before := a.jobs.Homes()
		w := a.call(http.MethodPost, peer.Cancel, body)
		fzStatus(t, w, "cancel")
		var req peer.CancelRequest
		ok := fzDecode(body, &req) && control.EndsUnstarted(req.Signal)
		for id, r := range a.jobs.Homes() {
			b := before[id]
			switch {
			case reflect.DeepEqual(r, b):
			case !ok || b.State != job.StatePending:
				t.Fatalf("cancel %q changed job %s, %s: %+v", body, id, b.State, r)
			case r.State != job.StateFinished || r.ExitCode == nil || *r.ExitCode != 128+req.Signal:
				t.Fatalf("cancel %q: pending job %s now %s %v", body, id, r.State, r.ExitCode)
			}
		}
		for _, s := range a.node.signals {
			if !ok || int(s.sig) != req.Signal {
				t.Fatalf("cancel %q sent signal %d to pid %d", body, s.sig, s.pid)
			}
		}
	})
}

// FuzzPeerSweep: /v1/peer/sweep answers the records of one sweep of
// this home, without their environments, and changes nothing.
func FuzzPeerSweep(f *testing.F) {
	f.Add(fzSweep)
	f.Add("n1:3")
	f.Add("n2.1")
	f.Add("")
	f.Add("n2:1:0-3")
	pool := newFzPool(f)
	f.Fuzz(func(t *testing.T, id string) {
		a := pool.get(t)
		fzSeedPending(a)
		before := a.jobs.Homes()
		w := a.call(http.MethodGet, peer.Sweep+"?"+url.Values{"id": {id}}.Encode(), nil)
		fzStatus(t, w, "sweep")
		if !reflect.DeepEqual(a.jobs.Homes(), before) {
			t.Fatalf("sweep %q changed the table", id)
		}
		if w.Code != http.StatusOK {
			return
		}
		var recs []job.Record
		if err := json.Unmarshal(w.Body.Bytes(), &recs); err != nil {
			t.Fatalf("sweep %q: %v", id, err)
		}
		for _, r := range recs {
			if r.Sweep.ID != id || r.Env != nil {
				t.Fatalf("sweep %q answered job %s of sweep %q, environment %q", id, r.ID, r.Sweep.ID, r.Env)
			}
		}
		if id == fzSweep && len(recs) != 1 {
			t.Fatalf("sweep %s: %d records", id, len(recs))
		}
	})
}
