package sim

// The agents' way of moving jobs, for comparing the simulator with real
// agents on one machine's emulated cluster (issue 48's validation (c),
// roam bench lvm-val). Off (the zero AgentModel), a round's moves all go
// at once, each frozen for MigrateFixed and its size's cost, and a node
// gives its processes exactly its capacity: the results are those of the
// simulator before this model, byte for byte.

import (
	"fmt"
	"time"

	"roam/internal/sched"
)

// AgentModel is how roam's agents move jobs, with costs measured where
// they run (roam bench lvm-val measures them on its cluster before the
// runs it compares; nothing in it is fitted to the runs themselves).
type AgentModel struct {
	// Lanes: a round's moves run as the agent's rounds.Loop runs them,
	// in sched.Lanes of the policy's parallel, one after another in a
	// lane (the next asks its destination when the one before ended),
	// rather than all at once.
	Lanes bool
	// Prepare is a move's time from its admission to the job's stop,
	// the job still running: the agent's and CRIU's set-up (a
	// migration's total less its freeze, measured).
	Prepare time.Duration
	// Freeze, when positive, is every move's freeze (from the job's stop
	// on the source to its run on the destination, measured), in place
	// of MigrateFixed and the size's cost.
	Freeze time.Duration
	// Speed is the CPU a process gets over its share of the node's
	// capacity, as the kernel's quota gives it (measured: a job alone on
	// a node of capacity c ran at Speed × c); 0 is 1. Slowdowns are still
	// against the capacity, as the agents' benchmark counts them.
	Speed float64
}

// On reports whether any part of the model is set.
func (m AgentModel) On() bool { return m != AgentModel{} }

// validate says what is wrong with m.
func (m AgentModel) validate() error {
	if m.Prepare < 0 || m.Freeze < 0 || m.Prepare > time.Hour || m.Freeze > time.Hour {
		return fmt.Errorf("agent model: prepare %v, freeze %v: want each in 0..1h", m.Prepare, m.Freeze)
	}
	if !(m.Speed >= 0 && m.Speed <= 4) {
		return fmt.Errorf("agent model: speed %v is not in 0..4", m.Speed)
	}
	return nil
}

// String is the model in one line, for reports.
func (m AgentModel) String() string {
	if !m.On() {
		return "off"
	}
	return fmt.Sprintf("lanes %t, prepare %v, freeze %v, speed %.3f", m.Lanes, m.Prepare, m.Freeze, m.speedOf())
}

// speedOf is the factor a process's progress is multiplied by.
func (m AgentModel) speedOf() float64 {
	if m.Speed > 0 {
		return m.Speed
	}
	return 1
}

// startLanes starts a round's moves at src in the agent's lanes: the
// first of each asks its destination now, each of the others when the
// one before it in its lane has ended (resolve).
func (s *Sim) startLanes(src int32, moves []sched.Move) {
	for _, lane := range sched.Lanes(moves, s.pol.Parallel()) {
		first := int32(-1)
		for k := len(lane) - 1; k >= 0; k-- {
			fi := s.newFlight(src, lane[k])
			s.flights[fi].next = first
			first = fi
		}
		s.send(event{kind: evAdmit, node: s.flights[first].dst, arg: first})
	}
}

// nextInLane starts the move after the flight that ended, if any: fi's
// fields as they were before it was freed.
func (s *Sim) nextInLane(next, src int32) {
	if next < 0 {
		return
	}
	if s.nodes[src].alive {
		s.send(event{kind: evAdmit, node: s.flights[next].dst, arg: next})
		return
	}
	for next >= 0 { // the source died: the lane's moves never start
		after := s.flights[next].next
		s.flights[next] = flight{}
		s.freeFlights = append(s.freeFlights, next)
		next = after
	}
}

// freeze is how long a move of p keeps it stopped.
func (s *Sim) freeze(p *proc) time.Duration {
	if f := s.cfg.Agents.Freeze; f > 0 {
		return f
	}
	return MigrateFixed + time.Duration((MigratePerMB+1/s.cfg.BandwidthMBps)*p.rssMB*float64(time.Second))
}
