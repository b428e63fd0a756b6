package phases

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"roam/internal/api"
	"roam/internal/job"
)

// Metrics are a node's migration metrics, as the source node of each
// migration saw it, and its checkpoints'. The zero Metrics counts
// nothing (an agent without a registry).
type Metrics struct {
	total  *prometheus.CounterVec
	bytes  prometheus.Counter
	freeze prometheus.Histogram
	dur    prometheus.Histogram
	window prometheus.Histogram
	// phases: where the time of each migration went, failed ones too.
	phases *prometheus.SummaryVec
	// checkpoints this node took, and how long each froze its job.
	ckpts      *prometheus.CounterVec
	ckptFreeze prometheus.Histogram
	ckptBytes  prometheus.Counter
}

// NewMetrics makes the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) Metrics {
	buckets := prometheus.ExponentialBuckets(0.005, 2, 14) // 5 ms to 41 s
	m := Metrics{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "roam_migrations_total",
			Help: "Migrations this node sent, by result (ok, failed)."}, []string{"result", "mode"}),
		bytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "roam_migration_bytes_total",
			Help: "Bytes this node sent for migrations (images, spool, lazy pages)."}),
		freeze: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "roam_migration_freeze_seconds",
			Help: "Time from a job stopping here to it running on the destination.", Buckets: buckets}),
		dur: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "roam_migration_seconds",
			Help: "Time of a whole migration, from the request to the end.", Buckets: buckets}),
		window: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "roam_migration_lazy_window_seconds",
			Help: "Post-copy window of lazy migrations: restore to last page.", Buckets: buckets}),
		phases: prometheus.NewSummaryVec(prometheus.SummaryOpts{Name: "roam_migration_phase_seconds",
			Help: "Steps of the migrations this node sent, by the node that timed them (side), step, mode, result, and whether the job was stopped during it."},
			[]string{"side", "phase", "mode", "result", "frozen"}),
	}
	m.ckpts = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "roam_checkpoints_total",
		Help: "Checkpoints this node took, by result (ok, failed)."}, []string{"result"})
	m.ckptFreeze = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "roam_checkpoint_freeze_seconds",
		Help: "Time a job was frozen for a checkpoint.", Buckets: buckets})
	m.ckptBytes = prometheus.NewCounter(prometheus.CounterOpts{Name: "roam_checkpoint_bytes_total",
		Help: "Bytes of the checkpoint files this node wrote."})
	reg.MustRegister(m.total, m.bytes, m.freeze, m.dur, m.window, m.phases, m.ckpts, m.ckptFreeze, m.ckptBytes)
	return m
}

// Observe counts a migration this node sent, ended well or not.
func (m Metrics) Observe(x job.Migration) {
	if m.total == nil {
		return
	}
	result, mode := "failed", "eager"
	if x.OK {
		result = "ok"
	}
	if x.Lazy {
		mode = "lazy"
	}
	m.total.WithLabelValues(result, mode).Inc()
	m.bytes.Add(float64(x.Bytes))
	for _, p := range x.Phases {
		m.phases.WithLabelValues(p.Side, p.Name, mode, result, strconv.FormatBool(p.Frozen)).Observe(p.MS / 1000)
	}
	if x.OK {
		m.freeze.Observe(x.FreezeMS / 1000)
		m.dur.Observe(x.TotalMS / 1000)
		if x.Lazy {
			m.window.Observe(x.WindowMS / 1000)
		}
	}
}

// ObserveCheckpoint counts a checkpoint this node took.
func (m Metrics) ObserveCheckpoint(c api.Checkpoint) {
	if m.ckpts == nil {
		return
	}
	if !c.OK {
		m.ckpts.WithLabelValues("failed").Inc()
		return
	}
	m.ckpts.WithLabelValues("ok").Inc()
	m.ckptFreeze.Observe(c.FreezeMS / 1000)
	m.ckptBytes.Add(float64(c.Bytes))
}
