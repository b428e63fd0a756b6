// Package sim is roam's discrete-event simulator: a virtual clock, one
// event queue and one *rand.Rand from the seed drive the agent's own
// decisions (package load's vector and choice of targets, package
// sched's snapshot builder, policies, admission and placement) on a
// model of the rest: nodes of a capacity and memory, processes of a CPU
// demand, memory and length shared by processor sharing, a network of
// one latency and bandwidth, migrations that freeze a job for what
// roam bench migrate measured, and membership that learns of a failed
// node after a detection delay.
//
// No decision rule is copied here: where the agent builds a decision's
// inputs (sched.Peers, sched.Ledger.Complete) or draws at random
// (load.PickTargets, sched.PickTwo), the simulator calls the same
// function, so that a decision's recorded inputs replay through it. What
// it models instead of measuring is said where it is modelled (node.go,
// gossip.go, rounds.go).
//
// It is pure like the core it drives: no goroutines, no clock, no I/O
// (Run takes a Config and returns Results; writing them is the CLI's).
// The same Config and seed give bit-identical Results. Memory is the
// limit at 100,000 nodes and more: nodes and processes are slices of
// structs indexed by number, with no map or goroutine per node.
package sim
