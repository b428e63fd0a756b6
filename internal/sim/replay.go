package sim

// Replaying a round an agent recorded (sched.Recorded, written by the
// agent's package decisions): its snapshot built again from its raw
// inputs by the simulator's own builder (roundInputs.snapshot), and its
// policy's decision taken again on it with the round's own draws. Any
// difference from what the agent built or decided is an error: the
// simulator's rounds would not be the agent's.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"

	"roam/internal/load"
	"roam/internal/sched"
)

// Replay rebuilds round r's snapshot and decision and says where they
// differ from the agent's, nil if nowhere.
func Replay(r sched.Recorded) error {
	vec := load.NewVector(max(len(r.Vector), 1), load.PolicyFIFO)
	for _, e := range r.Vector {
		vec.Update(e, 0) // oldest first, each in the next free slot
	}
	ledger := sched.LedgerFrom(r.Ledger)
	in := roundInputs{now: r.Now, self: r.Self, vec: vec, info: func(id string) sched.PeerInfo { return r.Members[id] },
		probed: r.Probed, here: r.Here, ledger: &ledger, prev: r.Prev, peers: make([]sched.Node, 0, len(r.Vector))}
	snap, least, _ := in.snapshot()
	if err := same("snapshot", snap, r.Snapshot); err != nil {
		return err
	}
	if least != r.Least {
		return fmt.Errorf("least CPU time %v, the agent's %v", least, r.Least)
	}
	pol, err := sched.ParsePolicy([]byte(r.Policy))
	if err != nil {
		return fmt.Errorf("the recorded policy: %w", err)
	}
	draws := &sched.Replay{Draws: r.Draws}
	var scratch []sched.Node
	moves := pol.DecideIn(snap, rand.New(draws), &scratch)
	if err := same("moves", moves, r.Moves); err != nil {
		return err
	}
	if draws.Next != len(r.Draws) || draws.Over > 0 {
		return fmt.Errorf("the decision drew %d numbers, the agent's %d", draws.Next+draws.Over, len(r.Draws))
	}
	return nil
}

// same compares what the simulator made with what the agent recorded,
// as JSON (the form the record has), an empty list and none alike: the
// record does not keep which of the two a ledger held.
func same(what string, sim, agent any) error {
	a, err := json.Marshal(sim)
	if err != nil {
		return err
	}
	b, err := json.Marshal(agent)
	if err != nil {
		return err
	}
	empty, none := []byte(":[]"), []byte(":null")
	if a, b = bytes.ReplaceAll(a, empty, none), bytes.ReplaceAll(b, empty, none); !bytes.Equal(a, b) {
		return fmt.Errorf("%s differ:\nsimulator %s\nagent     %s", what, a, b)
	}
	return nil
}
