package main

import (
	"fmt"
	"sync"

	"github.com/prometheus/procfs"
	"golang.org/x/sys/unix"

	"roam/internal/ckpt"
	"roam/internal/cpufeat"
)

// host is what this node says of its CPU, kernel and CRIU
// (agent.Parts.Host), read once at start: the CPU's features as the
// kernel shows them (/proc/cpuinfo's flags, which package cpufeat keeps
// the instruction-set ones of), its model, uname's release and machine,
// and CRIU's version. A feature counts only when every CPU shows it (on
// a hybrid CPU the kinds of cores show the same, but a flag one core
// lacks would be a trap). What cannot be read is left out: the node then
// says nothing of it, and every job fits here, as on an older roam.
func host(criuPath string, execMu *sync.Mutex) cpufeat.Host {
	var h cpufeat.Host
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		h.Kernel = unix.ByteSliceToString(u.Release[:])
		if fs, err := procfs.NewDefaultFS(); err == nil {
			if cpus, err := fs.CPUInfo(); err == nil && len(cpus) > 0 {
				h.CPU, h.Model = cpufeat.FromFlags(unix.ByteSliceToString(u.Machine[:]), common(cpus)), cpus[0].ModelName
			}
		}
	}
	c := ckpt.CRIU{Path: criuPath, ExecMu: execMu}
	if v, err := c.Version(); err == nil {
		h.CRIU = fmt.Sprintf("%d.%d.%d", v/10000, v/100%100, v%100)
	}
	return h.Bounded()
}

// common are the flags every CPU of cpus shows.
func common(cpus []procfs.CPUInfo) []string {
	count := map[string]int{}
	for _, c := range cpus {
		for _, f := range c.Flags {
			count[f]++
		}
	}
	var out []string
	for f, n := range count {
		if n == len(cpus) {
			out = append(out, f)
		}
	}
	return out
}
