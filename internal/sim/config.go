package sim

import (
	"errors"
	"fmt"
	"math/rand"
	"time"

	"roam/internal/load"
	"roam/internal/sched"
)

// Tunables of the model, each with where its value comes from.
const (
	// DefaultLatency is one-way network latency: a switched LAN.
	DefaultLatency = 200 * time.Microsecond
	// DefaultBandwidthMBps is what a migration's pages cross the link at,
	// in MiB/s: roam bench migrate's eager total minus its local dump and
	// restore, 2,825 - 1,706 ms for 1 GiB (docs/benchmarks.md).
	DefaultBandwidthMBps = 915
	// MigrateFixed and MigratePerMB are a migration's freeze besides the
	// copy: CRIU's dump and restore, 26 ms and 1.67 ms a MiB, fitted to
	// roam bench migrate's eager freezes (70 ms at 16 MiB, 272 ms at
	// 128 MiB, 2,825 ms at 1 GiB) and local dump and restore (1,706 ms at
	// 1 GiB).
	MigrateFixed = 26 * time.Millisecond
	MigratePerMB = 1.67e-3 // seconds a MiB
	// DefaultDetectAfter is how long membership takes to declare a dead
	// node dead: memberlist's LAN suspicion at a few hundred nodes.
	DefaultDetectAfter = 5 * time.Second
	// DefaultMemMB is a node's memory; DefaultRSSMB a process's resident
	// memory when the workload does not say.
	DefaultMemMB = 16384
	DefaultRSSMB = 64
	// unknownLimit: placement counts the members not in the load vector
	// (their load guessed, sched.Place) up to this many nodes, as the
	// agent does; past it they are left out, since the agent's O(nodes)
	// list at every start would cost the simulator O(nodes²). The report
	// says so.
	unknownLimit = 1024
)

// Config is one simulation.
type Config struct {
	Nodes    int
	Duration time.Duration // simulated time
	Seed     int64
	// Capacity is each node's CPU in cores; MemMB its memory.
	Capacity float64
	MemMB    float64
	// Policy is the scheduling policy's name (sched.Builtin), or "" for
	// none: no rounds, no migrations. Placement, when set, overrides the
	// policy's ("random" too: a node drawn at random, the supermarket's).
	Policy    string
	Placement string
	// Vector is the load vector's size and policy; Interval the gossip's.
	VectorSize   int
	VectorPolicy load.Policy
	Interval     time.Duration
	// RecentWindow is how long a sender counts as recent, for a load
	// send's first target (load.DefaultRecentWindow); negative: no sender
	// does, and both targets are drawn at random (the uniform gossip whose
	// mean age TestGossipAge derives).
	RecentWindow time.Duration
	// Oracle: placement sees every node's true load now, not the load
	// vector's (the supermarket model's assumption). No gossip runs.
	Oracle bool
	// Latency is one-way; BandwidthMBps what a migration's pages cross.
	Latency       time.Duration
	BandwidthMBps float64
	// Failures nodes die at times drawn uniformly over the run;
	// membership learns of each DetectAfter later.
	Failures    int
	DetectAfter time.Duration
	Workload    Workload
	// Prefill, when set, is how many processes a node holds at time 0
	// (drawn for each node in turn), each of a length drawn from the
	// workload (Poisson's): a model's run can start from its stationary
	// state rather than wait for it (TestSupermarket).
	Prefill func(rng *rand.Rand) int
	// Agents is how roam's agents move jobs, as measured on an emulated
	// cluster (agents.go); the zero value: the simulator's own model.
	Agents AgentModel
}

// DefaultConfig is 1,000 nodes of one core for a simulated minute under
// the default policy, with a Poisson stream at 70 % utilization.
func DefaultConfig() Config {
	return Config{Nodes: 1000, Duration: time.Minute, Seed: 1, Capacity: 1, MemMB: DefaultMemMB, Policy: sched.DefaultPolicy,
		VectorSize: load.DefaultVectorSize, VectorPolicy: load.PolicyFIFO, Interval: load.DefaultInterval, RecentWindow: load.DefaultRecentWindow,
		Latency: DefaultLatency, BandwidthMBps: DefaultBandwidthMBps, DetectAfter: DefaultDetectAfter,
		Workload: &Poisson{Utilization: 0.7, MeanLength: 60, Shape: 1.5}}
}

// MaxNodes bounds the nodes of one run: node numbers are int32, and
// 10⁷ nodes at 4 KB is 40 GB.
const MaxNodes = 10_000_000

// Validate says what is wrong with c, naming the field.
func (c Config) Validate() error {
	switch {
	case c.Nodes < 1 || c.Nodes > MaxNodes:
		return fmt.Errorf("nodes %d is not in 1..%d", c.Nodes, MaxNodes)
	case c.Duration <= 0:
		return fmt.Errorf("duration %v is not positive", c.Duration)
	case !(c.Capacity > 0 && c.Capacity <= 4096):
		return fmt.Errorf("capacity %v is not in (0, 4096]", c.Capacity)
	case !(c.MemMB > 0):
		return fmt.Errorf("memory %v MiB is not positive", c.MemMB)
	case c.VectorSize < 1 || c.VectorSize > 1024:
		return fmt.Errorf("vector size %d is not in 1..1024", c.VectorSize)
	case c.Interval <= 0:
		return fmt.Errorf("interval %v is not positive", c.Interval)
	case c.RecentWindow > 24*time.Hour:
		return fmt.Errorf("recent window %v is over 24h", c.RecentWindow)
	case c.Latency < 0 || !(c.BandwidthMBps > 0):
		return fmt.Errorf("latency %v or bandwidth %v MiB/s out of range", c.Latency, c.BandwidthMBps)
	case c.Failures < 0 || c.Failures >= c.Nodes:
		return fmt.Errorf("failures %d is not in 0..%d", c.Failures, c.Nodes-1)
	case c.Workload == nil:
		return errors.New("workload: none")
	}
	if err := c.Agents.validate(); err != nil {
		return err
	}
	if _, err := load.ParsePolicy(string(c.VectorPolicy)); err != nil {
		return fmt.Errorf("vector policy: %w", err)
	}
	if _, ok := sched.Builtin[c.Policy]; c.Policy != "" && !ok {
		return fmt.Errorf("policy %q is not one of roam's (sched.Builtin)", c.Policy)
	}
	switch c.Placement {
	case "", "least-loaded", "random-two", "round-robin", "random":
	default:
		return fmt.Errorf("placement %q is not one of least-loaded, random-two, round-robin, random", c.Placement)
	}
	return nil
}
