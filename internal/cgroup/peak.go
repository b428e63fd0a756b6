package cgroup

import "path/filepath"

// PeakMB is the most memory job id's group has held since it was made,
// in MiB, as the kernel counts it: memory.peak under v2 (Linux 5.19 and
// later; 0 on an older kernel), memory.max_usage_in_bytes under v1. Both
// count the page cache the job's files brought in, as memory.max and the
// OOM killer do.
func (j *Jobs) PeakMB(id string) float64 {
	if validName(id) != nil {
		return 0
	}
	name := "memory.max_usage_in_bytes"
	if j.Layout.V2 {
		name = "memory.peak"
	}
	v, err := readInt(filepath.Join(j.Layout.Memory, j.Rel(id), name))
	if err != nil {
		return 0
	}
	return float64(v) / (1 << 20)
}
