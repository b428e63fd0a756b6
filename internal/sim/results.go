package sim

import (
	"math"
	"time"
)

// histBuckets are slowdown's buckets: 1 % wide from 1 to about 10⁶, so
// that p99 is known to 1 % in a fixed 11 KB however many jobs end.
const (
	histBase    = 1.01
	histBuckets = 1400
)

// stats accumulate a run's measures as it goes.
type stats struct {
	events, messages, rounds      uint64
	submitted, done, lost, failed int
	migrations, refused           int
	firstSubmit, lastEnd          int64
	sumSlow, sumResp              float64
	hist                          []uint32
	ageSum                        float64 // seconds
	ageN                          uint64
	msgN                          uint64 // messages received, for sampleAge
}

func (st *stats) init() {
	st.hist = make([]uint32, histBuckets)
	st.firstSubmit = -1
}

// ended records a process that ended now, submitted at submit, that
// would have taken ideal seconds alone on a node.
func (st *stats) ended(now, submit int64, ideal float64) {
	resp := float64(now-submit) / 1e9
	slow := 1.0
	if ideal > 0 {
		slow = max(resp/ideal, 1)
	}
	st.done++
	st.sumSlow += slow
	st.sumResp += resp
	b := min(int(math.Log(slow)/math.Log(histBase)), histBuckets-1)
	st.hist[b]++
	if st.firstSubmit < 0 || submit < st.firstSubmit {
		st.firstSubmit = submit
	}
	st.lastEnd = max(st.lastEnd, now)
}

// age records the age of one load-vector entry at a send.
func (st *stats) age(ns int64) {
	st.ageSum += float64(ns) / 1e9
	st.ageN++
}

// quantile of slowdown, from the histogram: the bucket's upper edge.
func (st *stats) quantile(q float64) float64 {
	want := uint64(math.Ceil(q * float64(st.done)))
	var seen uint64
	for b, c := range st.hist {
		if seen += uint64(c); seen >= want && c > 0 {
			return math.Pow(histBase, float64(b+1))
		}
	}
	return 0
}

// Results are a run's measures: a function of its Config alone, so that
// two runs with one seed give identical Results.
type Results struct {
	Nodes       int     `json:"nodes"`
	Seconds     float64 `json:"simulated_seconds"`
	Seed        int64   `json:"seed"`
	Policy      string  `json:"policy"`
	Placement   string  `json:"placement"`
	Vector      string  `json:"vector_policy"`
	Submitted   int     `json:"processes_submitted"`
	Done        int     `json:"processes_done"`
	Lost        int     `json:"processes_lost"`
	Failed      int     `json:"nodes_failed"`
	Makespan    float64 `json:"makespan_s"`
	MeanResp    float64 `json:"mean_response_s"`
	MeanSlow    float64 `json:"mean_slowdown"`
	P99Slow     float64 `json:"p99_slowdown"`
	Migrations  int     `json:"migrations"`
	Refused     int     `json:"moves_refused"`
	Rounds      uint64  `json:"rounds"`
	GossipAge   float64 `json:"mean_gossip_age_s"`
	MsgsPerNode float64 `json:"messages_per_node_per_s"`
}

// Cost is what the run cost the simulator: not a result, since it
// varies from run to run, and so written apart.
type Cost struct {
	Nodes        int     `json:"nodes"`
	Seconds      float64 `json:"simulated_seconds"`
	Wall         float64 `json:"wall_seconds"`
	Events       uint64  `json:"events"`
	EventsPerSec float64 `json:"events_per_second"`
	BytesPerNode float64 `json:"bytes_per_node"`
	// RSSPerNode is the process's peak resident memory over the nodes:
	// the heap's with the collector's headroom, the runtime's and the
	// binary's.
	RSSPerNode float64 `json:"peak_rss_bytes_per_node"`
}

func (s *Sim) results() Results {
	st := &s.stats
	secs := s.cfg.Duration.Seconds()
	r := Results{Nodes: len(s.nodes), Seconds: secs, Seed: s.cfg.Seed, Policy: s.cfg.Policy, Placement: s.placement, Vector: string(s.cfg.VectorPolicy),
		Submitted: st.submitted, Done: st.done, Lost: st.lost, Failed: st.failed, Migrations: st.migrations, Refused: st.refused, Rounds: st.rounds,
		MsgsPerNode: float64(st.messages) / float64(len(s.nodes)) / secs}
	if s.cfg.Oracle {
		r.Vector = ""
	}
	if st.done > 0 {
		r.Makespan = float64(st.lastEnd-st.firstSubmit) / 1e9
		r.MeanResp = st.sumResp / float64(st.done)
		r.MeanSlow = st.sumSlow / float64(st.done)
		r.P99Slow = st.quantile(0.99)
	}
	if st.ageN > 0 {
		r.GossipAge = st.ageSum / float64(st.ageN)
	}
	return r
}

// Events is how many events the run took.
func (s *Sim) Events() uint64 { return s.stats.events }

// CostOf is a run's cost: its wall time and memory, measured by the
// caller (the heap in use with the run's state live, and the process's
// peak resident memory, over its nodes).
func (s *Sim) CostOf(wall time.Duration, heapBytes, peakRSS uint64) Cost {
	n := float64(len(s.nodes))
	return Cost{Nodes: len(s.nodes), Seconds: s.cfg.Duration.Seconds(), Wall: wall.Seconds(), Events: s.stats.events,
		EventsPerSec: float64(s.stats.events) / max(wall.Seconds(), 1e-9), BytesPerNode: float64(heapBytes) / n, RSSPerNode: float64(peakRSS) / n}
}
