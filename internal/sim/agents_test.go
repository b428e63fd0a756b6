package sim

import (
	"testing"
	"time"
)

// agentFanout is validation (c)'s smallest scenario: 8 jobs of 20 s
// alone started on node 0 of 8 nodes of 0.1 CPU, under balance.
func agentFanout(t *testing.T, m AgentModel) FanoutResult {
	t.Helper()
	c := DefaultConfig()
	c.Nodes, c.Capacity, c.Policy, c.Seed, c.Agents = 8, 0.1, "balance", 3, m
	r, err := RunFanout(c, Fanout{Warmup: 10 * time.Second, Jobs: 8, Work: 2})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Each part of the agents' model shows in the makespan: a freeze of 3 s
// delays every moved job by 3 s; in lanes of 4 the 7 moves go in two
// waves, so the second wave lands another freeze later; 2 s of prepare,
// during which the jobs still share node 0, delay them by nearly 2 s;
// and a speed of 2 halves the time. Ignore a part and its line fails.
func TestAgentModel(t *testing.T) {
	off := agentFanout(t, AgentModel{})
	freeze := agentFanout(t, AgentModel{Freeze: 3 * time.Second})
	lanes := agentFanout(t, AgentModel{Freeze: 3 * time.Second, Lanes: true})
	prep := agentFanout(t, AgentModel{Prepare: 2 * time.Second})
	fast := agentFanout(t, AgentModel{Speed: 2})
	t.Logf("makespan: off %.2f, freeze %.2f, lanes %.2f, prepare %.2f, speed %.2f; migrations %d %d %d %d %d",
		off.Makespan, freeze.Makespan, lanes.Makespan, prep.Makespan, fast.Makespan,
		off.Migrations, freeze.Migrations, lanes.Migrations, prep.Migrations, fast.Migrations)
	if off.Migrations != 7 || off.Makespan > 21 {
		t.Fatalf("model off: %d migrations, makespan %.2f s; want 7 and under 21 s", off.Migrations, off.Makespan)
	}
	if d := freeze.Makespan - off.Makespan; d < 2.5 {
		t.Errorf("a freeze of 3 s added %.2f s to the makespan, want ≥ 2.5", d)
	}
	// The second wave ran at node 0 meanwhile (a quarter of 0.1 CPU
	// for 3 s, 0.75 s of its 20), so it lands about 2.25 s later.
	if d := lanes.Makespan - freeze.Makespan; d < 2 {
		t.Errorf("lanes of 4 for 7 moves added %.2f s to the makespan, want ≥ 2 (a second wave of 3 s freezes)", d)
	}
	if d := prep.Makespan - off.Makespan; d < 1.5 {
		t.Errorf("2 s of prepare added %.2f s to the makespan, want ≥ 1.5", d)
	}
	if r := fast.Makespan / off.Makespan; r < 0.45 || r > 0.55 {
		t.Errorf("speed 2: makespan %.2f of %.2f, ratio %.3f, want about 0.5", fast.Makespan, off.Makespan, r)
	}
	// Slowdowns count against the capacity (the agents' bench's), and
	// are at least 1: jobs twice as fast as alone are at 1.
	if fast.MeanSlow != 1 {
		t.Errorf("speed 2: mean slowdown %.3f, want 1", fast.MeanSlow)
	}
}

// A model out of range is refused, naming it.
func TestAgentModelValidate(t *testing.T) {
	c := DefaultConfig()
	for _, m := range []AgentModel{{Freeze: -1}, {Prepare: 2 * time.Hour}, {Speed: 5}, {Speed: -1}} {
		c.Agents = m
		if err := c.Validate(); err == nil {
			t.Errorf("%+v: accepted", m)
		}
	}
}
