package sim

import (
	"math"
	"math/rand"
	"time"
)

// Job is one job of a workload: Procs processes of Work CPU-seconds
// each (one thread at most one core), submitted together.
type Job struct {
	Submit time.Duration // since the run's start
	Work   float64       // CPU seconds per process
	Procs  int
	RSSMB  float64 // resident memory per process; 0: DefaultRSSMB
}

// Workload yields jobs in order of Submit; ok false: no more. It draws
// only from rng, the run's. Begin is a fresh copy of it for a run on a
// cluster of capacity cores: a Config's workload is never consumed, and
// two runs of one Config see the same jobs.
type Workload interface {
	Next(rng *rand.Rand) (j Job, ok bool)
	Begin(capacity float64) Workload
}

// Poisson is a Poisson stream of one-process jobs whose lengths follow a
// Pareto law (Harchol-Balter and Downey: process lifetimes are heavy
// tailed), at a mean utilization of the cluster's capacity. Its rate is
// fixed by Start (the cluster it feeds).
type Poisson struct {
	Utilization float64 // of the cluster's capacity, 0..1
	MeanLength  float64 // seconds of CPU
	// Shape is the Pareto law's α (> 1; 1.5 is heavy tailed with a finite
	// mean); 0 makes lengths exponential (the supermarket model's).
	Shape float64
	RSSMB float64
	rate  float64 // jobs a second
	at    float64
}

// Begin is the stream at its rate for a cluster of capacity cores.
func (p *Poisson) Begin(capacity float64) Workload {
	c := *p
	c.rate, c.at = p.Utilization*capacity/p.MeanLength, 0
	return &c
}

func (p *Poisson) Next(rng *rand.Rand) (Job, bool) {
	if p.rate <= 0 {
		return Job{}, false
	}
	p.at += rng.ExpFloat64() / p.rate
	return Job{Submit: time.Duration(p.at * float64(time.Second)), Work: p.length(rng), Procs: 1, RSSMB: p.RSSMB}, true
}

// length draws a job's length: Pareto of minimum xm = mean(α-1)/α, or
// exponential.
func (p *Poisson) length(rng *rand.Rand) float64 {
	if p.Shape <= 1 {
		return rng.ExpFloat64() * p.MeanLength
	}
	xm := p.MeanLength * (p.Shape - 1) / p.Shape
	return xm / math.Pow(1-rng.Float64(), 1/p.Shape)
}

// Trace replays a list of jobs (an SWF file's, ReadSWF).
type Trace struct {
	Jobs []Job
	i    int
}

func (t *Trace) Next(*rand.Rand) (Job, bool) {
	if t.i >= len(t.Jobs) {
		return Job{}, false
	}
	t.i++
	return t.Jobs[t.i-1], true
}

// Begin is the trace from its first job.
func (t *Trace) Begin(float64) Workload { return &Trace{Jobs: t.Jobs} }
