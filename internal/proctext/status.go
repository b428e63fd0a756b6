// Package proctext parses the text of /proc files (a task's status:
// its credentials, its pid in its namespace, its state and tracer). It
// does no I/O: the pure core (internal/migrate) judges what the agent
// read with it, and procfs reads the files.
package proctext

import (
	"strconv"
	"strings"
)

// ParseNSPid reads the innermost pid of a status file's NSpid line.
func ParseNSPid(status string) (int, bool) {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			fs := strings.Fields(v)
			if len(fs) == 0 {
				return 0, false
			}
			n, err := strconv.Atoi(fs[len(fs)-1])
			return n, err == nil && n > 0
		}
	}
	return 0, false
}

// ParseTrace reads a status file's state letter and its tracer's pid (0:
// none).
func ParseTrace(status string) (state byte, tracer int) {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, "State:"); ok {
			if v = strings.TrimSpace(v); v != "" {
				state = v[0]
			}
		} else if v, ok := strings.CutPrefix(line, "TracerPid:"); ok {
			tracer, _ = strconv.Atoi(strings.TrimSpace(v))
		}
	}
	return state, tracer
}
