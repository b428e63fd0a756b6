package limits

import (
	"strings"
	"testing"

	"roam/internal/resources"
)

// A run's request: what it gives, and the home's defaults for what it
// leaves out; a bad value is refused naming its flag.
func TestRunRequest(t *testing.T) {
	def := DefaultJobs()
	def.DefaultMemBytes = 256 << 20
	for _, c := range []struct {
		cpus float64
		mem  int64
		want resources.Request
	}{
		{0, 0, resources.Request{MilliCPUs: 1000, MemBytes: 256 << 20}},
		{0.5, 0, resources.Request{MilliCPUs: 500, MemBytes: 256 << 20}},
		{2, 64 << 20, resources.Request{MilliCPUs: 2000, MemBytes: 64 << 20}},
		{0.01, 0, resources.Request{MilliCPUs: 10, MemBytes: 256 << 20}},
	} {
		got, err := Request(c.cpus, c.mem, def.DefaultRequest())
		if err != nil || got != c.want {
			t.Errorf("Request(%v, %d) = %+v, %v; want %+v", c.cpus, c.mem, got, err, c.want)
		}
	}
	for _, c := range []struct {
		cpus float64
		mem  int64
		flag string
	}{{-1, 0, "--cpus"}, {0.0005, 0, "--cpus"}, {1.2345, 0, "--cpus"}, {5000, 0, "--cpus"}, {0, 1, "--mem"}, {0, -5, "--mem"}, {0, 1 << 51, "--mem"}} {
		if got, err := Request(c.cpus, c.mem, def.DefaultRequest()); err == nil || !strings.HasPrefix(err.Error(), c.flag) {
			t.Errorf("Request(%v, %d) = %+v, %v; want an error naming %s", c.cpus, c.mem, got, err, c.flag)
		}
	}
}

func TestJobsValidate(t *testing.T) {
	if k, err := DefaultJobs().Validate(); err != nil {
		t.Fatalf("defaults: %s: %v", k, err)
	}
	for want, j := range map[string]Jobs{
		"jobs.default_cpus":      {DefaultCPUs: 0, Pids: 4096},
		"jobs.default_mem_bytes": {DefaultCPUs: 1, Pids: 4096, DefaultMemBytes: 64 << 20, MemoryBytes: 32 << 20},
		"jobs.pids":              {DefaultCPUs: 1, Pids: 0},
		"jobs.memory_bytes":      {DefaultCPUs: 1, Pids: 4096, MemoryBytes: 1},
	} {
		if k, err := j.Validate(); k != want || err == nil {
			t.Errorf("%+v: %s, %v; want %s", j, k, err, want)
		}
	}
}
