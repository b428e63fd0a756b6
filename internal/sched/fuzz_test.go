package sched

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand"
	"slices"
	"sort"
	"testing"
	"time"
)

// Fuzz targets for what the scheduler takes from outside the process: a
// policy file's text (the config's file, `roam policy load`, a peer's
// /v1/peer/policy, and the gossiped policy state, which is Text() of a
// parsed policy), and a policy's move a source sends to
// /v1/peer/migrate/admit. scripts/fuzz.sh runs them.

// FuzzParsePolicy: a policy ParsePolicy accepts is whole (a name, a known
// placement, a period of at least 100ms, every kind and type known, every
// link to a component of the layer below, every parameter a finite number
// in its range); its Text, which nodes gossip, parses again to the same
// text; and its decisions move only jobs that exist and are not held, to
// peers, at most max_moves per manager.
func FuzzParsePolicy(f *testing.F) {
	names := make([]string, 0, len(Builtin))
	for n := range Builtin {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f.Add([]byte(Builtin[n]))
	}
	for _, s := range []string{
		"name: p\nperiod: 250ms\nplacement: random-two\n",
		"name: p\nprobes:\n  c: {kind: cpu}\nanalyzers:\n  t: {type: threshold, inputs: [c], params: {cpu: 0.5}}\nmanagers:\n  m: {type: migrate, inputs: [t], params: {hysteresis_gain: 2, syscall_mb: 0.5, max_moves: 100}}\n",
		"name: p\nprobes:\n  c: &a {kind: cpu}\nanalyzers:\n  b: {type: balance, inputs: [c], params: *a}\n",
		"name: p\nprobes:\n  c: {kind: cpu}\nanalyzers:\n  b: {type: balance, inputs: [c], params: &t {threshold: 0.1}}\n",
		"# a comment\nname: p # why\nprobes: # the probes\n  c: {kind: cpu}\nanalyzers:\n  b:\n    type: balance\n    inputs: [c]\n    params:\n      # the threshold\n      threshold: 0.3\n",
		"name: p\nperiod: 10ms\n",
		"name: p\nperiod: -1s\n",
		"name: p\nplacement: best\n",
		"name: p\nprobes:\n  c: {kind: disk}\n",
		"name: p\nmanagers:\n  m: {type: migrate, inputs: [nothing]}\n",
		"name: p\nmanagers:\n  m: {type: migrate, params: {max_moves: 0}}\n",
		"name: p\nunknown: 1\n",
		"name: [a]\n",
		"",
		"---\n---\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		s, err := ParsePolicy(text)
		if err != nil {
			if s != nil {
				t.Fatal("a policy and an error")
			}
			return
		}
		checkPolicy(t, s)
		again, err := ParsePolicy([]byte(s.Text()))
		if err != nil {
			t.Fatalf("its Text does not parse: %v\ntext:\n%s", err, s.Text())
		}
		if again.Text() != s.Text() {
			t.Fatalf("Text changes when parsed again:\n%s\nthen:\n%s", s.Text(), again.Text())
		}
		checkDecisions(t, s)
	})
}

func checkPolicy(t *testing.T, s *Scheduler) {
	t.Helper()
	p := s.Policy
	switch {
	case p.Name == "":
		t.Fatal("no name")
	case !slices.Contains(Placements, p.Placement):
		t.Fatalf("placement %q", p.Placement)
	case time.Duration(p.Period) < 100*time.Millisecond:
		t.Fatalf("period %v", time.Duration(p.Period))
	case len(s.analyzers) != len(p.Analyzers) || len(s.managers) != len(p.Managers):
		t.Fatalf("%d of %d analyzers, %d of %d managers built", len(s.analyzers), len(p.Analyzers), len(s.managers), len(p.Managers))
	}
	for name, pr := range p.Probes {
		if !slices.Contains(probeKinds, pr.Kind) {
			t.Fatalf("probe %s: kind %q", name, pr.Kind)
		}
	}
	finite := func(what string, v float64) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			t.Fatalf("%s %v accepted", what, v)
		}
	}
	for name, c := range p.Analyzers {
		for _, in := range c.Inputs {
			if _, ok := p.Probes[in]; !ok {
				t.Fatalf("analyzer %s: input %q is no probe", name, in)
			}
		}
		switch a := s.analyzers[name].(type) {
		case *balance:
			finite("balance threshold", a.Threshold)
			if a.Threshold < 0 {
				t.Fatalf("balance threshold %v", a.Threshold)
			}
		case *ushering:
			finite("ushering min_free_mb", a.MinFreeMB)
			if a.MinFreeMB <= 0 {
				t.Fatalf("ushering min_free_mb %v", a.MinFreeMB)
			}
		case *threshold:
			finite("threshold cpu", a.CPU)
			if a.CPU <= 0 {
				t.Fatalf("threshold cpu %v", a.CPU)
			}
		default:
			t.Fatalf("analyzer %s is a %T", name, a)
		}
	}
	for _, nm := range s.managers {
		for _, in := range nm.inputs {
			if _, ok := p.Analyzers[in]; !ok {
				t.Fatalf("manager %s: input %q is no analyzer", nm.name, in)
			}
		}
		m, ok := nm.m.(*migrateManager)
		if !ok {
			t.Fatalf("manager %s is a %T", nm.name, nm.m)
		}
		finite("syscall_mb", m.SyscallMB)
		finite("hysteresis_gain", m.HysteresisGain)
		finite("crowd", m.Crowd)
		switch {
		case m.Max < 1 || m.Max > 100:
			t.Fatalf("max_moves %d", m.Max)
		case m.SyscallMB < 0:
			t.Fatalf("syscall_mb %v", m.SyscallMB)
		case m.HysteresisGain != 0 && m.HysteresisGain < 1.5:
			t.Fatalf("hysteresis_gain %v", m.HysteresisGain)
		case m.MinAge < 0 || m.Hysteresis < 0:
			t.Fatalf("min_age %v, hysteresis %v", time.Duration(m.MinAge), time.Duration(m.Hysteresis))
		case m.Crowd < 0 || m.Crowd > 0 && m.CrowdMinAge >= m.MinAge:
			t.Fatalf("crowd %v, crowd_min_age %v, min_age %v", m.Crowd, time.Duration(m.CrowdMinAge), time.Duration(m.MinAge))
		}
	}
}

// checkDecisions runs a round on a busy node with idle peers.
func checkDecisions(t *testing.T, s *Scheduler) {
	t.Helper()
	now := time.Unix(1700000000, 0)
	snap := Snapshot{
		Now:  now,
		Self: Node{ID: "n1", Capacity: 2, Load: 4, MemFreeMB: 10},
		Peers: []Node{
			{ID: "n2", Capacity: 4, Load: 0, MemFreeMB: 8000, Received: now},
			{ID: "n3", Capacity: 1, Load: 0.5, MemFreeMB: 200, Received: now.Add(-time.Second)},
		},
		Jobs: []Job{
			{ID: "n1.1", Started: now.Add(-time.Hour), RSSMB: 100, Runnable: 1},
			{ID: "n1.2", Started: now.Add(-time.Minute), RSSMB: 10, Runnable: 2, SyscallsPerSec: 50},
			{ID: "n1.3", Started: now.Add(-time.Hour), RSSMB: 1, Runnable: 1, Held: "pin"},
			{ID: "n1.4", Started: now.Add(-time.Hour), LastMoved: now.Add(-time.Second), Moves: 1, RSSMB: 5, Runnable: 1},
			{ID: "n1.5", Started: now, RSSMB: 1, Runnable: 1},
		},
	}
	max := 0
	for _, nm := range s.managers {
		max += nm.m.MaxMoves()
	}
	moves := s.Decide(snap, rand.New(rand.NewSource(1)))
	if len(moves) > max {
		t.Fatalf("%d moves, the managers allow %d", len(moves), max)
	}
	moved := map[string]bool{}
	for _, mv := range moves {
		i := slices.IndexFunc(snap.Jobs, func(j Job) bool { return j.ID == mv.Job })
		switch {
		case i < 0 || snap.Jobs[i].Held != "":
			t.Fatalf("move %+v of a job that is not here or is held", mv)
		case moved[mv.Job]:
			t.Fatalf("job %s moved twice in a round", mv.Job)
		case mv.To != "n2" && mv.To != "n3":
			t.Fatalf("move %+v to a node that is not a peer", mv)
		case !mv.Kind.known():
			t.Fatalf("move %+v of an unknown kind", mv)
		}
		moved[mv.Job] = true
	}
}

// FuzzLedgerAdmit: the destination's admission of a move a peer sent
// (decoded as the agent decodes /v1/peer/migrate/admit). A refused move
// changes nothing; a taken one is of a known kind, and counting it in can
// only add to the node's load and take from its free memory, now and in
// every later Reserved until it arrives.
func FuzzLedgerAdmit(f *testing.F) {
	add := func(mv Move) {
		b, err := json.Marshal(mv)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	at := time.Unix(1700000000, 0)
	add(Move{Job: "n1.7", To: "n2", From: "n1", Why: "balance", At: at, By: "global", Kind: ProblemCPU, RSSMB: 40, Runnable: 1, SrcLoad: 3, Threshold: 0.25})
	add(Move{Job: "n1.8", To: "n2", From: "n1", Kind: ProblemCPU, RSSMB: 1, Runnable: 4, SrcLoad: 10, Threshold: 0.25, Gain: 1.75})
	add(Move{Job: "n1.9", To: "n2", From: "n1", Kind: ProblemMemory, RSSMB: 300, KeepFreeMB: 64})
	add(Move{Job: "n1.10", To: "n2", From: "n1", Kind: "disk"})
	add(Move{Job: "n1.12", To: "n2", From: "n1", Kind: ProblemCPU, Runnable: -5, SrcLoad: 1e300, Threshold: -1})
	f.Add([]byte(`{"Job":"n1.1","Kind":"cpu","SrcLoad":1e308,"Runnable":9223372036854775807}`))
	f.Add([]byte(`{"Job":"n1.1","Kind":"memory","RSSMB":-0}`))
	add(Move{Job: "n3.1", To: "n2", From: "n3", Kind: ProblemCPU, Runnable: 2, SrcLoad: 5, Threshold: 0.25}) // asked again
	add(Move{Job: "n1.13", To: "n2", From: "n1", Kind: ProblemTurn, RSSMB: 5, Runnable: 1, SrcLoad: 2, Attained: 4, Behind: 1, TurnEvery: DefaultTurnEvery})
	add(Move{Job: "n1.14", To: "n2", From: "n1", Kind: ProblemTurn, RSSMB: 5, Runnable: 1, SrcLoad: 2, Attained: 4, Behind: 2.9, TurnEvery: DefaultTurnEvery})
	add(Move{Job: "n1.15", To: "n2", From: "n1", Kind: ProblemTurn, Runnable: 1, SrcLoad: 1, Attained: 1e12, Behind: -1})
	f.Add([]byte(`{"Job":1}`))
	f.Add([]byte(`null`))
	self := Node{ID: "n2", Capacity: 2, Load: 0.5, MemFreeMB: 4096, Least: 3}
	f.Fuzz(func(t *testing.T, body []byte) {
		var mv Move
		if err := json.NewDecoder(bytes.NewReader(body)).Decode(&mv); err != nil {
			return
		}
		var l Ledger
		now := at
		first := l.Admit(Move{Job: "n3.1", To: "n2", From: "n3", Kind: ProblemCPU, Runnable: 1, SrcLoad: 5, Threshold: 0.25}, self, now)
		if first.Refused != nil {
			t.Fatalf("the fixed first move was refused: %v", first.Refused)
		}
		before := l.Reserved(self, now)
		ans := l.Admit(mv, self, now)
		after := l.Reserved(self, now)
		if ans.Refused != nil {
			if after != before || ans.Load != before.Load || ans.MemFreeMB != before.MemFreeMB || ans.Least != before.Least {
				t.Fatalf("refused move %+v changed the node from %+v to %+v (answered %+v)", mv, before, after, ans)
			}
			return
		}
		// A move of the first move's job takes that admission's place: it
		// adds to the node without it.
		base := before
		if mv.Job == "n3.1" {
			base = self
		}
		switch {
		case !mv.Kind.known():
			t.Fatalf("move of kind %q taken", mv.Kind)
		case ans.Load != after.Load || ans.MemFreeMB != after.MemFreeMB || ans.Least != after.Least:
			t.Fatalf("answered %+v, but the node counts %+v", ans, after)
		case (base.Least > 0 && after.Least > base.Least) || after.Least > mv.Attained:
			t.Fatalf("taking move %+v made the node's least CPU time %v (from %v)", mv, after.Least, base.Least)
		case mv.Kind == ProblemTurn && (after.Load > mv.SrcLoad+loadEpsilon || base.Least-mv.Behind < turnLead(mv, base) || after.MemFreeMB < TurnKeepFreeMB):
			t.Fatalf("turn %+v taken by %+v: it loads the node more than its source, or lacks the lead", mv, base)
		case math.IsNaN(after.Load) || math.IsNaN(after.MemFreeMB):
			t.Fatalf("the node's reserved load is %v, free memory %v", after.Load, after.MemFreeMB)
		case after.Load < base.Load:
			t.Fatalf("taking move %+v lowered the node's load from %v to %v", mv, base.Load, after.Load)
		case after.MemFreeMB > base.MemFreeMB:
			t.Fatalf("taking move %+v raised the node's free memory from %v to %v MiB", mv, base.MemFreeMB, after.MemFreeMB)
		}
		l.Arrived(mv.Job)
		if mv.Job != "n3.1" && l.Reserved(self, now) != before {
			t.Fatalf("after job %s arrived the node counts %+v, want %+v", mv.Job, l.Reserved(self, now), before)
		}
	})
}
