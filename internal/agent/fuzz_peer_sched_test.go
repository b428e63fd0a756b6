package agent

// Fuzz targets of the agent (their harness is fuzz_test.go):
// The peer routes of scheduling: admissions and policies.

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/agent/rounds"
	"roam/internal/api"
	"roam/internal/sched"
)

// ---- peer port: scheduling ----

// FuzzPeerAdmit: /v1/peer/migrate/admit judges only a move to this node
// whose numbers a policy could make (sched.Move.Check);
// taking one can only add to the node's load and take from its free
// memory, as it answers. Its withdrawal (DELETE, the same body) takes
// only a move to this node, and ends the admission the POST made: the
// node then holds no place.
func FuzzPeerAdmit(f *testing.F) {
	f.Add(fzJSON(f, sched.Move{Job: "n1.7", To: fzSelf, From: "n1", Kind: sched.ProblemCPU, RSSMB: 40, Runnable: 1, SrcLoad: 3, Threshold: 0.25}))
	f.Add(fzJSON(f, sched.Move{Job: "n1.7", To: fzSelf, From: "n1", Kind: sched.ProblemMemory, RSSMB: 300, KeepFreeMB: 64}))
	f.Add(fzJSON(f, sched.Move{Job: "n1.7", To: "n3", From: "n1", Kind: sched.ProblemCPU, SrcLoad: 3}))
	f.Add(fzJSON(f, sched.Move{Job: "", To: fzSelf, Kind: sched.ProblemCPU, SrcLoad: 3}))
	f.Add(fzJSON(f, sched.Move{Job: "n1.7", To: fzSelf, Kind: "disk", SrcLoad: 3}))
	f.Add([]byte(`{"Job":"n1.7","To":"n2","Kind":"cpu","SrcLoad":1e308,"Runnable":-3}`))
	f.Add(fzJSON(f, sched.Move{Job: "n1.7", To: fzSelf, From: "n1", Kind: sched.ProblemTurn, RSSMB: 40, Runnable: 1, SrcLoad: 10, Attained: 3, Behind: 1, TurnEvery: sched.DefaultTurnEvery}))
	f.Add(fzJSON(f, sched.Move{Job: "n1.7", To: fzSelf, From: "n1", Kind: sched.ProblemTurn, Runnable: 1, SrcLoad: 10, Attained: 3, Behind: 1.9, TurnEvery: sched.DefaultTurnEvery}))
	pool := newFzPool(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		a := pool.get(t)
		w := a.call(http.MethodPost, "/v1/peer/migrate/admit", body)
		fzStatus(t, w, "admit")
		var mv sched.Move
		if !fzDecode(body, &mv) {
			if w = a.call(http.MethodDelete, "/v1/peer/migrate/admit", body); w.Code != http.StatusBadRequest {
				t.Fatalf("withdrawal %q answered %d", body, w.Code)
			}
			return
		}
		if mv.Job == "" || mv.To != fzSelf || mv.Check() != nil {
			if w.Code != http.StatusBadRequest {
				t.Fatalf("move %+v answered %d", mv, w.Code)
			}
			w = a.call(http.MethodDelete, "/v1/peer/migrate/admit", body)
			fzStatus(t, w, "withdraw")
			if (mv.Job == "" || mv.To != fzSelf) != (w.Code == http.StatusBadRequest) {
				t.Fatalf("withdrawal of move %+v answered %d", mv, w.Code)
			}
			return
		}
		var r peer.AdmitAnswer
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &r) != nil {
			t.Fatalf("answered %d: %s", w.Code, w.Body)
		}
		load := 1 / a.capacity // the node's one runnable thread
		if r.Refused == "" && (r.Load < load || r.MemFreeMB > 4096 || r.Least > fzLeast || r.Least > mv.Attained) {
			t.Fatalf("took move %+v and answered load %v (from %v), free %v MiB (from 4096), least CPU time %v (from %v)", mv, r.Load, load, r.MemFreeMB, r.Least, fzLeast)
		}
		w = a.call(http.MethodDelete, "/v1/peer/migrate/admit", body)
		fzStatus(t, w, "withdraw")
		var wr peer.WithdrawAnswer
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &wr) != nil || wr.Ended != (r.Refused == "") {
			t.Fatalf("withdrawal of move %+v (refused %q) answered %d: %s", mv, r.Refused, w.Code, w.Body)
		}
		n := a.rounds.Pending(time.Now())
		if n != 0 {
			t.Fatalf("after its withdrawal, %d admissions pending", n)
		}
	})
}

// FuzzPeerPolicy: /v1/peer/policy runs a policy only when it parses,
// answers with the policy it runs, and that policy's text parses.
func FuzzPeerPolicy(f *testing.F) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Add(fzJSON(f, api.PolicyRequest{Text: sched.Builtin["balance"], At: at, Version: 3}))
	f.Add(fzJSON(f, api.PolicyRequest{Text: sched.Builtin["static"]}))
	f.Add(fzJSON(f, api.PolicyRequest{Text: sched.Builtin["threshold"], Version: 18446744073709551615}))
	f.Add(fzJSON(f, api.PolicyRequest{Name: "balance"}))
	f.Add(fzJSON(f, api.PolicyRequest{Text: "name: x\nperiod: 1ms\n", At: at}))
	f.Add(fzJSON(f, api.PolicyRequest{Text: "name: x\nprobes: {c: {kind: cpu}}\nanalyzers: {t: {type: threshold, inputs: [c], params: {cpu: 0.5}}}\n", At: at}))
	f.Add([]byte(`{"text":5}`))
	pool := newFzPool(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		a := pool.get(t)
		old := a.sched.Policy()
		w := a.call(http.MethodPost, "/v1/peer/policy", body)
		fzStatus(t, w, "policy")
		now := a.sched.Policy()
		if _, err := sched.ParsePolicy([]byte(now.Text)); err != nil {
			t.Fatalf("the node runs a policy whose text does not parse: %v", err)
		}
		var req api.PolicyRequest
		if w.Code != http.StatusOK {
			if now != old {
				t.Fatalf("a refused policy (%d) replaced %q by %q", w.Code, old.Name, now.Name)
			}
			return
		}
		if !fzDecode(body, &req) {
			t.Fatalf("a body that does not decode answered 200")
		}
		if _, err := sched.ParsePolicy([]byte(req.Text)); err != nil {
			t.Fatalf("policy taken that does not parse: %v", err)
		}
		if req.Version > rounds.MaxPolicyVersion {
			t.Fatalf("policy of version %d taken, past the bound", req.Version)
		}
		var got api.NodePolicy
		if json.Unmarshal(w.Body.Bytes(), &got) != nil || got != now {
			t.Fatalf("answered %s, the node runs %+v", w.Body, now)
		}
	})
}
