package bench

// lvm-val's comparison: the simulator's fan-outs, seed by seed, against
// the agents' runs, and the errors' medians with their intervals.

import (
	"fmt"
	"math"
	"slices"
	"time"

	"roam/internal/load"
	"roam/internal/paired"
	"roam/internal/sim"
)

// valTolerance is issue 48's line 3 (c): the median error on makespan
// and mean slowdown at most 5 %.
const valTolerance = 0.05

// valWarmup is the simulator's gossip before the start, as roam sim
// lvm's: the vectors full, as the bench waits for them to be.
const valWarmup = 10 * time.Second

// valError is the simulator's errors against the agents, run by run
// (sim / agents − 1): their median with its interval, and the median of
// their absolute values.
type valError struct {
	Median paired.MedianInterval
	Abs    float64
}

func valErrors(simv, agents []float64) valError {
	e := paired.RelErrors(simv, agents)
	abs := make([]float64, len(e))
	for i, v := range e {
		abs[i] = math.Abs(v)
	}
	return valError{Median: paired.Median(e), Abs: paired.Median(abs).Median}
}

// within reports whether the median error is within the tolerance.
func (e valError) within() bool { return math.Abs(e.Median.Median) <= valTolerance }

// pct is the error in percent with its interval, and the absolute median.
func (e valError) pct() string {
	m := e.Median
	s := fmt.Sprintf("%+.1f %%", 100*m.Median)
	if !math.IsNaN(m.Lo) {
		s += fmt.Sprintf(" [%+.1f, %+.1f] (%.1f %% coverage)", 100*m.Lo, 100*m.Hi, 100*m.Level)
	}
	return s + fmt.Sprintf(", |error| median %.1f %%", 100*e.Abs)
}

// valSim runs the fan-out of n nodes, jc jobs, seed in the simulator
// with model m.
func valSim(v *valSide, jc sim.JobCount, seed int64, m sim.AgentModel) (sim.FanoutResult, error) {
	c := sim.DefaultConfig()
	c.Nodes, c.Capacity, c.Policy, c.VectorPolicy, c.Seed, c.Agents = v.n, v.cpu, "balance", load.PolicyFIFO, seed, m
	return sim.RunFanout(c, sim.Fanout{Warmup: valWarmup, Jobs: jc.Of(v.n), Work: v.work})
}

// valSideRuns are one side's values run by run: the agents', or the
// simulator's under one model.
type valSideRuns struct {
	name     string
	mk, sl   []float64
	mig      []float64
	modelled sim.AgentModel
}

// valCompare runs the simulator's side of v and records both sides,
// the errors, notes and checks.
func valCompare(r *Result, v *valSide) {
	for _, jc := range v.jobsSpec {
		if err := valCompareJobs(r, v, jc); err != nil {
			r.Notes = append(r.Notes, fmt.Sprintf("%d nodes, jobs %s: %v", v.n, jc, err))
		}
	}
	r.Notes = append(r.Notes, fmt.Sprintf("%d nodes of %.3g CPU: calibration: speed %s with a job on every node (%d jobs), %s alone (%d), freeze %s ms, prepare %s ms (%d moves); load average (1 min) at the runs' starts %s, from %.2f to %.2f",
		v.n, v.cpu, paired.Median(v.speed).Format(3), len(v.speed), paired.Median(v.speedAlone).Format(3), len(v.speedAlone), paired.Median(v.freeze).Format(0), paired.Median(v.prepare).Format(0), len(v.freeze),
		paired.Median(v.loads).Format(2), extreme(v.loads, slices.Min), extreme(v.loads, slices.Max)))
}

// valCompareJobs is valCompare for one job count.
func valCompareJobs(r *Result, v *valSide, jc sim.JobCount) error {
	x, key := float64(v.n), jc.String()
	sides := []*valSideRuns{{name: "agents"}, {name: "sim"}, {name: "sim + agent model", modelled: v.calibrated}}
	for k, w := range v.agents[key] {
		off, err := valSim(v, jc, int64(k+1), sim.AgentModel{})
		if err != nil {
			return err
		}
		on, err := valSim(v, jc, int64(k+1), v.calibrated)
		if err != nil {
			return err
		}
		for i, got := range [][3]float64{{w.makespan, w.slowdown, float64(w.migrations)},
			{off.Makespan, off.MeanSlow, float64(off.Migrations)}, {on.Makespan, on.MeanSlow, float64(on.Migrations)}} {
			s := sides[i]
			s.mk, s.sl, s.mig = append(s.mk, got[0]), append(s.sl, got[1]), append(s.mig, got[2])
			series := s.name + ", jobs " + key
			r.Add(series, x, "makespan", "s", got[0])
			r.Add(series, x, "mean slowdown", "", got[1])
			r.Add(series, x, "migrations", "", got[2])
		}
	}
	ag := sides[0]
	for _, s := range sides[1:] {
		mk, sl := valErrors(s.mk, ag.mk), valErrors(s.sl, ag.sl)
		slErr := paired.RelErrors(s.sl, ag.sl)
		for i, e := range paired.RelErrors(s.mk, ag.mk) {
			r.Add(s.name+", jobs "+key, x, "makespan error", "%", 100*e)
			if i < len(slErr) {
				r.Add(s.name+", jobs "+key, x, "mean slowdown error", "%", 100*slErr[i])
			}
		}
		r.Notes = append(r.Notes, fmt.Sprintf("%d nodes, %d jobs (%s), %s (model: %s) against agents over %d runs: makespan error %s; mean slowdown error %s; migrations a run, median: agents %s, simulator %s",
			v.n, jc.Of(v.n), key, s.name, s.modelled, len(ag.mk), mk.pct(), sl.pct(), paired.Median(ag.mig).Format(1), paired.Median(s.mig).Format(1)))
		r.Check(fmt.Sprintf("%d nodes, jobs %s, %s: median error ≤ 5 %% on makespan and mean slowdown", v.n, key, s.name),
			mk.within() && sl.within(), "makespan %+.1f %%, mean slowdown %+.1f %%", 100*mk.Median.Median, 100*sl.Median.Median)
	}
	r.Notes = append(r.Notes, fmt.Sprintf("%d nodes, jobs %s: agents' makespan median %s s, mean slowdown %s; their moves' freezes median %s ms over %d moves",
		v.n, key, paired.Median(ag.mk).Format(2), paired.Median(ag.sl).Format(3), paired.Median(v.freezes[key]).Format(0), len(v.freezes[key])))
	return nil
}

// extreme is f of xs, NaN for none.
func extreme(xs []float64, f func([]float64) float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	return f(xs)
}
