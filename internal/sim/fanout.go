package sim

// Seed 000's load-balancing experiment (§6, Fig. 11 and 16): after a
// warm-up in which the load gossip fills every node's vector, Jobs
// processes start at once on node 0, the home node, with no placement
// (the DKG's children, roam run --on 1), and the policy spreads them.
// Its measure is the load-balancing time, as roam bench lvm's
// (bench.BalancedAfter): from the start until every node runs within
// one job of its share, looking only before the first job ends; a run
// that never gets there counts its makespan.
//
// The run is observed from outside the decisions: which node a process
// is on, and whether a load message's entry is in the receiver's vector
// after it arrived. Nothing here decides for the simulator.

import (
	"fmt"
	"math"
	"time"
)

// Fanout is one fan-out run's workload.
type Fanout struct {
	// Warmup is the gossip's time before the start: a few seconds fill
	// the vectors (each node hears from about two nodes a second).
	Warmup time.Duration
	Jobs   int
	Work   float64 // CPU seconds per job
}

// fanoutLimit bounds a fan-out run's simulated time after its start.
const fanoutLimit = time.Hour

// FanoutResult is one fan-out run's measures, times in seconds from the
// start.
type FanoutResult struct {
	Seed     int64   `json:"seed"`
	Nodes    int     `json:"nodes"`
	Jobs     int     `json:"jobs"`
	Vector   string  `json:"vector_policy"`
	Makespan float64 `json:"makespan_s"`
	MeanSlow float64 `json:"mean_slowdown"`
	Balanced float64 `json:"balanced_s"`
	Never    bool    `json:"never_balanced"` // Balanced is then the makespan
	// Spread is the looser moment no node holds more than its share + 1
	// (the same as Balanced when the share is under one job); the
	// makespan if never before the first end.
	Spread      float64 `json:"spread_s"`
	NeverSpread bool    `json:"never_spread"`
	FirstEnd    float64 `json:"first_end_s"`
	Migrations  int     `json:"migrations"`
	// Full is how many load messages since the start came to a full
	// vector from a node not in it (an overflow); Discarded how many of
	// those the vector did not keep (beneficial's refusals).
	Full      int `json:"overflows"`
	Discarded int `json:"discarded"`
}

// fanoutRun is a fan-out run in progress.
type fanoutRun struct {
	s      *Sim
	f      Fanout
	t0     int64
	res    FanoutResult
	counts []int32 // scratch: processes a node holds
}

// NewFanout checks c and f; c's Workload and Duration are the run's own.
func newFanout(c Config, f Fanout) (*fanoutRun, error) {
	if f.Jobs < 1 || !(f.Work > 0) || f.Warmup < 0 {
		return nil, fmt.Errorf("fan-out: jobs %d, work %v s, warm-up %v: want positive, positive, not negative", f.Jobs, f.Work, f.Warmup)
	}
	c.Workload, c.Duration, c.Failures = &Trace{}, f.Warmup+fanoutLimit, 0
	s, err := New(c)
	if err != nil {
		return nil, err
	}
	r := &fanoutRun{s: s, f: f, t0: int64(f.Warmup), counts: make([]int32, c.Nodes)}
	r.res = FanoutResult{Seed: c.Seed, Nodes: c.Nodes, Jobs: f.Jobs, Vector: string(c.VectorPolicy), Balanced: math.NaN(), Spread: math.NaN(), FirstEnd: math.NaN()}
	return r, nil
}

// RunFanout runs the fan-out f on the cluster c describes.
func RunFanout(c Config, f Fanout) (FanoutResult, error) {
	r, err := newFanout(c, f)
	if err != nil {
		return FanoutResult{}, err
	}
	return r.run(), nil
}

// run is Sim.Run's loop with the fan-out's start at t0 and its
// observations around the events.
func (r *fanoutRun) run() FanoutResult {
	s := r.s
	s.start()
	end, started := int64(s.cfg.Duration), false
	for s.q.len() > 0 {
		e := s.q.pop()
		if e.at > end {
			break
		}
		if !started && e.at >= r.t0 {
			started = true
			r.begin()
		}
		s.now = e.at
		s.stats.events++
		r.observe(e)
		if started && s.stats.done+s.stats.lost >= r.f.Jobs {
			break
		}
	}
	return r.finish()
}

// begin starts the jobs on node 0 at t0.
func (r *fanoutRun) begin() {
	s := r.s
	s.now = r.t0
	for range r.f.Jobs {
		s.startOn(0, s.newProc(Job{Work: r.f.Work, Procs: 1}))
	}
	r.check()
}

// observe dispatches e, and looks at what it changed: a load message's
// entry kept or not, a job landed (balanced now?), the first end.
func (r *fanoutRun) observe(e event) {
	s := r.s
	if e.kind != evMsg || s.now < r.t0 || !s.nodes[e.node].alive {
		s.dispatch(e)
		if e.kind == evLand && s.now >= r.t0 {
			r.check()
		}
		if e.kind == evDone && s.stats.done > 0 && math.IsNaN(r.res.FirstEnd) {
			r.res.FirstEnd = float64(s.now-r.t0) / 1e9
		}
		return
	}
	v, id := &s.nodes[e.node].vec, s.ids[e.arg]
	_, known := v.Get(id)
	full := !known && v.Len() == s.cfg.VectorSize
	s.dispatch(e)
	if full {
		r.res.Full++
		if got, ok := v.Get(id); !ok || !got.Received.Equal(t(s.now)) {
			r.res.Discarded++
		}
	}
}

// check records the first moment every node runs within one job of
// its share (all nodes of one capacity: Jobs / Nodes), and the first
// no node runs more than its share + 1, before any job ended. A job in
// flight counts on its source, as the bench's migration logs place it
// until it runs at the destination.
func (r *fanoutRun) check() {
	s := r.s
	if !math.IsNaN(r.res.Balanced) || s.stats.done > 0 {
		return
	}
	clear(r.counts)
	for i := range s.procs {
		if p := &s.procs[i]; p.state != ended && p.node >= 0 {
			r.counts[p.node]++
		}
	}
	share := float64(r.f.Jobs) / float64(len(s.nodes))
	within, spread := true, true
	for _, c := range r.counts {
		within = within && math.Abs(float64(c)-share) < 1
		spread = spread && float64(c) <= share+1
	}
	at := float64(s.now-r.t0) / 1e9
	if spread && math.IsNaN(r.res.Spread) {
		r.res.Spread = at
	}
	if within {
		r.res.Balanced = at
	}
}

// finish fills in the measures at the end.
func (r *fanoutRun) finish() FanoutResult {
	st := &r.s.stats
	res := r.res
	res.Migrations = st.migrations
	if st.done > 0 {
		res.Makespan = float64(st.lastEnd-r.t0) / 1e9
		res.MeanSlow = st.sumSlow / float64(st.done)
	}
	if math.IsNaN(res.Balanced) {
		res.Balanced, res.Never = res.Makespan, true
	}
	if math.IsNaN(res.Spread) {
		res.Spread, res.NeverSpread = res.Makespan, true
	}
	if math.IsNaN(res.FirstEnd) {
		res.FirstEnd = 0 // no job ended within the run's limit
	}
	return res
}
