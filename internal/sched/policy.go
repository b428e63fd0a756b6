package sched

// Kerrighed's three layers (seed 004 §4.2), as roam declares them in a
// policy file:
//
//	probes ──readings──▶ analyzers ──problems──▶ managers ──▶ moves
//
// Probes are measured by the agent (I/O); here they are only named, with
// how they are woken: by a timer (active) or by an event such as a job
// starting or ending (passive). Analyzers turn the readings of the probes
// they are linked to into local problems; managers turn the problems of the
// analyzers they are linked to into migrations. Placement at start is a
// setting of the same file.

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Probe kinds the agent measures.
const (
	ProbeCPU    = "cpu"    // runnable threads per unit of capacity; active
	ProbeMemory = "memory" // free memory of the node; active
	ProbeJobs   = "jobs"   // jobs starting and ending; passive
)

var probeKinds = []string{ProbeCPU, ProbeMemory, ProbeJobs}

// Tunables of the built-in policies, each with where it comes from.
const (
	// DefaultPeriod is how often active probes run and managers decide
	// (seed 000 §3.1: loads are exchanged each second).
	DefaultPeriod = time.Second
	// DefaultBalanceThreshold is how much lower, per unit of capacity, a
	// node's load must be after it takes one more process than ours before
	// one moves: openMosix moves only when the gain is clear (seed 001
	// §2.1); a quarter of a process on one core.
	DefaultBalanceThreshold = 0.25
	// DefaultMinAge: a process younger than this stays (seed 003 §4.3:
	// most processes are short; moving them costs more than it gains).
	DefaultMinAge = 2 * time.Second
	// DefaultCrowd is the default policy's crowd: a round that finds its
	// node's load this much above a peer's with one more job (runnable
	// threads per unit of capacity) moves its jobs younger than min_age
	// too, as far as it would move old ones. min_age weighs a move's
	// cost, the job's freeze (0.1 to 0.4 s here), against what the job
	// has left, which its age predicts. On a node this crowded the wait
	// costs every job there most of its share while peers' CPUs sit
	// idle, and a move can be a loss only for a job within
	// freeze/(its load - the target's) CPU-seconds of its end
	// (Harchol-Balter and Downey: move a process older than cost/(n-m)),
	// 20 to 80 ms for the round's first moves. A job alone, or a few
	// sharing a node of their size, waits min_age as before. The model's
	// numbers: TestYoungJobsLeaveOnlyACrowdedNode.
	DefaultCrowd = 5
	// DefaultCrowdMinAge: with crowd set, a job younger than this stays
	// however crowded its node: balance's min_age. In the model, 100 ms
	// moved 39 % of 40 short jobs typed on a 4-CPU node at a loss (their
	// mean end 1.64 times static placement's), 500 ms a third of 12 on
	// the 0.2-CPU node, and slowed make demo's burst.
	DefaultCrowdMinAge = 250 * time.Millisecond
	// DefaultPreemptAfter is the feedback policy's quantum of the queue's
	// second level (Policy.PreemptAfter): a fluid model of roam bench
	// sweep (600 jobs, Pareto lengths, memory requests of 32, 64 and 256
	// MiB; bench.TestSweepTargetIsPastTheBound) gives 0.719 of static
	// placement's mean slowdown at half a CPU-second, 0.80 at one, where a
	// checkpoint and a restore cost nothing. Measured, they cost
	// more than the order wins (docs/benchmarks.md, sweep), so the
	// default policy has no second level.
	DefaultPreemptAfter = 500 * time.Millisecond
	// MinPreemptAfter and MaxPreemptAfter bound it: under 100 ms a
	// checkpoint's freeze and file cost more than the job had; over a
	// day it never comes.
	MinPreemptAfter = 100 * time.Millisecond
	MaxPreemptAfter = 24 * time.Hour
	// DefaultHysteresis: a process that moved stays this long (no
	// ping-pong; seed 003 §4.4 counts migrations).
	DefaultHysteresis = 10 * time.Second
	// DefaultHysteresisGain: within the hysteresis, a job moves again
	// only to at least (about) double its share of a CPU: 1.75, since an
	// idle peer's smoothed load takes seconds to fall the last bit to 0.
	DefaultHysteresisGain = 1.75
	// DefaultMaxMoves bounds the moves one manager starts per round. Each
	// move is folded into the snapshot before the next is picked, so the
	// analyzers stop a round once no move gains enough: the bound is for a
	// burst, which one round spreads as far as the gain justifies (MOSIX
	// and Kerrighed spread one in well under a second; three a round, one
	// after the other, took seconds here).
	DefaultMaxMoves = 16
	// DefaultParallel is how many of a round's moves run at once, each to
	// another node (Lanes).
	DefaultParallel = 4
	// DefaultUsherFreeMB: ushering starts when less memory than this is
	// free on the node.
	DefaultUsherFreeMB = 64
	// DefaultCPUThreshold is Kerrighed's example (seed 004 §4.2): CPU use
	// over 80 %.
	DefaultCPUThreshold = 0.8
)

// Policy is a scheduler as declared in a policy file.
type Policy struct {
	// Name says what it is, for `roam policy show`.
	Name string `yaml:"name"`
	// Placement is how `roam run` places new jobs: least-loaded,
	// random-two or round-robin.
	Placement string `yaml:"placement"`
	// PreemptAfter is the CPU time a job of a sweep has before its home
	// may preempt it (checkpoint it to disk, its room freed, and start it
	// again after the sweep's jobs that have not run) while fresh jobs of
	// the same sweep wait for room: the queue's second level (package
	// queue, Preempt). 0: never, as static placement, which moves no job
	// in space or in time.
	PreemptAfter Duration `yaml:"preempt_after,omitempty"`
	// Period is how often active probes run and managers decide.
	Period    Duration             `yaml:"period"`
	Probes    map[string]ProbeDef  `yaml:"probes"`
	Analyzers map[string]Component `yaml:"analyzers"`
	Managers  map[string]Component `yaml:"managers"`
}

// ProbeDef declares a probe: its kind (cpu, memory, jobs).
type ProbeDef struct {
	Kind string `yaml:"kind"`
}

// Component declares an analyzer or a manager: its type (which Go type
// implements it), what it reads from (probes for an analyzer, analyzers
// for a manager), and its parameters, which its type decodes.
type Component struct {
	Type   string    `yaml:"type"`
	Inputs []string  `yaml:"inputs"`
	Params yaml.Node `yaml:"params"`
}

// Duration is a time.Duration written as "2s" in YAML.
type Duration time.Duration

func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := time.ParseDuration(n.Value)
	if err != nil || v < 0 {
		return fmt.Errorf("line %d: %q is not a duration like 2s", n.Line, n.Value)
	}
	*d = Duration(v)
	return nil
}

func (d Duration) MarshalYAML() (any, error) { return time.Duration(d).String(), nil }

// Placements are the valid placement names.
var Placements = []string{"least-loaded", "random-two", "round-robin"}

// ParsePolicy reads a policy file's text and checks it: every type known,
// every link to a component that exists, every parameter valid. Nothing is
// half-loaded: it returns the policy, built, or one error naming the field.
func ParsePolicy(text []byte) (*Scheduler, error) {
	var p Policy
	dec := yaml.NewDecoder(bytes.NewReader(text))
	dec.KnownFields(true)
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("policy: %v", err)
	}
	return Build(p)
}

// Build checks a policy and makes its components.
func Build(p Policy) (*Scheduler, error) {
	if p.Name == "" {
		return nil, fmt.Errorf("policy: name is missing")
	}
	if p.Placement == "" {
		p.Placement = "least-loaded"
	}
	if !slices.Contains(Placements, p.Placement) {
		return nil, fmt.Errorf("policy %s: placement %q is not one of %s", p.Name, p.Placement, strings.Join(Placements, ", "))
	}
	if d := time.Duration(p.PreemptAfter); d != 0 && (d < MinPreemptAfter || d > MaxPreemptAfter) {
		return nil, fmt.Errorf("policy %s: preempt_after %s is not 0 nor between %s and %s", p.Name, d, MinPreemptAfter, MaxPreemptAfter)
	}
	if p.Period == 0 {
		p.Period = Duration(DefaultPeriod)
	}
	if time.Duration(p.Period) < 100*time.Millisecond {
		return nil, fmt.Errorf("policy %s: period %s is under 100ms", p.Name, time.Duration(p.Period))
	}
	for name, pr := range p.Probes {
		if !slices.Contains(probeKinds, pr.Kind) {
			return nil, fmt.Errorf("policy %s: probe %s: kind %q is not one of %s", p.Name, name, pr.Kind, strings.Join(probeKinds, ", "))
		}
	}
	s := &Scheduler{Policy: p, analyzers: map[string]Analyzer{}}
	isProbe := func(n string) bool { _, ok := p.Probes[n]; return ok }
	isAnalyzer := func(n string) bool { _, ok := p.Analyzers[n]; return ok }
	err := buildAll(p.Name, "analyzer", "a probe", p.Analyzers, analyzerTypes, isProbe, func(name string, _ Component, a Analyzer) {
		s.analyzers[name] = a
	})
	if err == nil {
		err = buildAll(p.Name, "manager", "an analyzer", p.Managers, managerTypes, isAnalyzer, func(name string, c Component, m Manager) {
			s.managers = append(s.managers, namedManager{name, m, c.Inputs})
		})
	}
	if err != nil {
		return nil, err
	}
	s.text = policyText(p)
	return s, nil
}

// buildAll makes the components of one layer, in name order: each type
// known, each input one of the layer below (inputOK), its parameters valid.
func buildAll[T any](policy, layer, below string, comps map[string]Component, types map[string]func(*yamlNode) (T, error),
	inputOK func(string) bool, add func(string, Component, T)) error {
	for _, name := range slices.Sorted(maps.Keys(comps)) {
		c := comps[name]
		mk, ok := types[c.Type]
		if !ok {
			return fmt.Errorf("policy %s: %s %s: type %q is not one of %s", policy, layer, name, c.Type, strings.Join(slices.Sorted(maps.Keys(types)), ", "))
		}
		for _, in := range c.Inputs {
			if !inputOK(in) {
				return fmt.Errorf("policy %s: %s %s: input %q is not %s of this policy", policy, layer, name, in, below)
			}
		}
		v, err := mk(&c.Params)
		if err != nil {
			return fmt.Errorf("policy %s: %s %s: %v", policy, layer, name, err)
		}
		add(name, c, v)
	}
	return nil
}

// decodeParams decodes a component's parameters into out (which holds the
// defaults), refusing unknown fields.
func decodeParams(n *yaml.Node, out any) error {
	if n == nil || n.Kind == 0 {
		return nil
	}
	b, err := yaml.Marshal(n)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("params: %v", err)
	}
	return finite(reflect.ValueOf(out).Elem(), "")
}

// finite refuses a NaN or infinite number anywhere in v: every comparison
// with one is false, so a threshold of NaN would turn its check off.
func finite(v reflect.Value, field string) error {
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			return fmt.Errorf("params: %s is %v, not a finite number", field, f)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			sf := v.Type().Field(i)
			if !sf.IsExported() {
				continue
			}
			name := sf.Name
			if tag, _, _ := strings.Cut(sf.Tag.Get("yaml"), ","); tag != "" {
				name = tag
			}
			if err := finite(v.Field(i), name); err != nil {
				return err
			}
		}
	case reflect.Pointer:
		if !v.IsNil() {
			return finite(v.Elem(), field)
		}
	}
	return nil
}

// Text is the policy as YAML, for `roam policy show`, for gossip and for
// comparing two policies. Build makes it once: a Scheduler's Policy is
// not changed after Build.
func (s *Scheduler) Text() string { return s.text }

// policyText is p as YAML (the error's text if it cannot be marshalled).
func policyText(p Policy) string {
	b, err := yaml.Marshal(p)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// Parallel is how many moves of a round may run at once: the largest of
// its managers' parallel, at least 1.
func (s *Scheduler) Parallel() int {
	n := 1
	for _, nm := range s.managers {
		n = max(n, nm.m.Parallel())
	}
	return n
}

// Lanes orders a round's moves for running: moves to one node in one
// lane, in the round's order (its admissions judge each against the
// moves before it); lanes run side by side, at most parallel of them, so
// a burst leaves for several nodes at once. A destination first seen
// joins the lane with the fewest moves so far (the first of those).
func Lanes(moves []Move, parallel int) [][]Move {
	parallel = max(parallel, 1)
	lane := map[string]int{}
	var out [][]Move
	for _, mv := range moves {
		i, ok := lane[mv.To]
		if !ok {
			if len(out) < parallel {
				i = len(out)
				out = append(out, nil)
			} else {
				i = 0
				for k := range out {
					if len(out[k]) < len(out[i]) {
						i = k
					}
				}
			}
			lane[mv.To] = i
		}
		out[i] = append(out[i], mv)
	}
	return out
}

// Passive reports whether a probe woken by events (jobs) feeds the
// policy: then the agent runs a round at once when a job starts or ends.
func (s *Scheduler) Passive() bool {
	for _, p := range s.Policy.Probes {
		if p.Kind == ProbeJobs {
			return true
		}
	}
	return false
}

type yamlNode = yaml.Node

// Builtin are the policies roam ships, by name: `roam policy load NAME`
// takes these as well as a file.
var Builtin = map[string]string{
	// static: the MPI/Beowulf baseline the seeds measure against: placed
	// round-robin at start, never moved.
	"static": `name: static
placement: round-robin
`,
	// balance: MOSIX/openMosix pairwise CPU load balancing. Its min_age is
	// short: a small job's eager move freezes it for 50–90 ms here (the
	// migration table of docs/benchmarks.md), and a process that has run for a time
	// can be expected to run about as long again (the process-lifetime
	// rule of thumb MOSIX's age rule rests on), so a job of a quarter
	// second moved off a node it shares to one it has alone gains more
	// than its freeze. A burst typed on one node then spreads in under a
	// second, not after one.
	"balance": `name: balance
placement: least-loaded
probes:
  cpu: {kind: cpu}
  jobs: {kind: jobs}
analyzers:
  balance: {type: balance, inputs: [cpu, jobs], params: {threshold: 0.25}}
managers:
  global: {type: migrate, inputs: [balance], params: {min_age: 250ms, hysteresis: 10s, max_moves: 16, parallel: 4}}
`,
	// ushering: memory ushering alone.
	"ushering": `name: ushering
placement: least-loaded
probes:
  memory: {kind: memory}
analyzers:
  ushering: {type: ushering, inputs: [memory], params: {min_free_mb: 64}}
managers:
  global: {type: migrate, inputs: [ushering], params: {min_age: 1s, hysteresis: 5s, max_moves: 1}}
`,
	// threshold: Kerrighed's example, CPU use over 80 % sends one process
	// to the least-loaded node.
	"threshold": `name: threshold
placement: least-loaded
probes:
  cpu: {kind: cpu}
analyzers:
  threshold: {type: threshold, inputs: [cpu], params: {cpu: 0.8}}
managers:
  global: {type: migrate, inputs: [threshold], params: {min_age: 2s, hysteresis: 20s, max_moves: 1}}
`,
	// mosix: balance and ushering together, the default. A job waits
	// min_age (2 s) before it moves, unless its node is crowded (crowd:
	// DefaultCrowd): a burst typed on one node spreads at a quarter
	// second.
	"mosix": "name: mosix\n" + mosixBody,
	// feedback: mosix with the queue's second level: a sweep's job that
	// has had DefaultPreemptAfter of CPU while fresh jobs of its sweep
	// wait for room is preempted.
	"feedback": "name: feedback\n" + mosixBody + "preempt_after: 500ms\n", // DefaultPreemptAfter
}

// mosixBody is the mosix policy but its name, which feedback shares.
const mosixBody = `placement: least-loaded
probes:
  cpu: {kind: cpu}
  memory: {kind: memory}
  jobs: {kind: jobs}
analyzers:
  balance: {type: balance, inputs: [cpu, jobs], params: {threshold: 0.25}}
  ushering: {type: ushering, inputs: [memory], params: {min_free_mb: 64}}
managers:
  global: {type: migrate, inputs: [balance, ushering], params: {min_age: 2s, crowd: 5, crowd_min_age: 250ms, hysteresis: 10s, max_moves: 16, parallel: 4}}
`

// DefaultPolicy is what a node runs until told otherwise.
const DefaultPolicy = "mosix"
