package observe

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"roam/internal/api"
)

// Register puts the node's own collectors on reg: the standard Go,
// process and build-info ones, roam's version, the jobs of this home
// node by node, user and state, and the membership as this node knows
// it.
func Register(reg prometheus.Registerer, hub *Hub, src Source, users bool) error {
	for _, c := range []prometheus.Collector{
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		collectors.NewBuildInfoCollector(),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "roam", Name: "version_info", Help: "roam's version and the protocol its agents speak; always 1.",
			ConstLabels: prometheus.Labels{"version": api.Version, "protocol": itoa(api.Protocol)},
		}, func() float64 { return 1 }),
		&clusterCollector{hub: hub, src: src, users: users},
	} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

var (
	jobsDesc = prometheus.NewDesc("roam_jobs", "Jobs whose home is this node, by the node they are on and their state (each job counted at its home only, so a sum over the nodes counts each once).",
		[]string{"node", "state"}, nil)
	jobsByUserDesc = prometheus.NewDesc("roam_jobs", "Jobs whose home is this node, by the node they are on, their user and state (each job counted at its home only, so a sum over the nodes counts each once).",
		[]string{"node", "user", "state"}, nil)
	memberDesc = prometheus.NewDesc("roam_member_up", "Members of the cluster as this node knows them: 1 alive, 0 declared dead.",
		[]string{"node"}, nil)
	drainingDesc = prometheus.NewDesc("roam_member_draining", "1 for a member being drained (roam node drain): its jobs leave, none goes there.",
		[]string{"node"}, nil)
	memberVersionDesc = prometheus.NewDesc("roam_member_version_info", "The roam version each member gossips; always 1.",
		[]string{"node", "version"}, nil)
)

// clusterCollector reports the jobs and the membership at scrape time.
type clusterCollector struct {
	hub   *Hub
	src   Source
	users bool // metrics_job_users: jobs by user too
}

func (c *clusterCollector) jobs() *prometheus.Desc {
	if c.users {
		return jobsByUserDesc
	}
	return jobsDesc
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.jobs(), memberDesc, drainingDesc, memberVersionDesc} {
		ch <- d
	}
}

// gauge sends a gauge of desc; a label that is not valid UTF-8 (a node
// id or a user name from NSS) is made so, never a panic of the scrape.
func gauge(ch chan<- prometheus.Metric, desc *prometheus.Desc, v float64, labels ...string) {
	for i, l := range labels {
		labels[i] = strings.ToValidUTF8(l, "?")
	}
	if m, err := prometheus.NewConstMetric(desc, prometheus.GaugeValue, v, labels...); err == nil {
		ch <- m
	}
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	self := ""
	for _, n := range c.src.Nodes() {
		up, draining := 0.0, 0.0
		if n.Alive {
			up = 1
		}
		if n.Draining {
			draining = 1
		}
		if n.Self {
			self = n.ID
		}
		gauge(ch, memberDesc, up, n.ID)
		gauge(ch, drainingDesc, draining, n.ID)
		gauge(ch, memberVersionDesc, 1, n.ID, n.Version)
	}
	type key struct{ node, user, state string }
	counts := map[key]int{}
	for _, j := range c.hub.fetchJobs(metricsMaxAge) {
		if j.Home == self {
			k := key{node: j.Node, state: j.State}
			if c.users {
				k.user = userName(j)
			}
			counts[k]++
		}
	}
	for k, n := range counts {
		if c.users {
			gauge(ch, jobsByUserDesc, float64(n), k.node, k.user, k.state)
		} else {
			gauge(ch, jobsDesc, float64(n), k.node, k.state)
		}
	}
}

// userName is a job's user, or its uid when the home had no name for it.
func userName(j api.Job) string {
	if j.User != "" {
		return j.User
	}
	return itoa(j.UID)
}
