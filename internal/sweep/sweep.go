// Package sweep is the pure rules of a sweep, the jobs of one `roam run
// -n N` as one object: the sweep's id and its references with index
// ranges, the substitution of an --args-from line into the command, the
// --output and --error patterns, which indices --max-running lets start
// (Release), and the summary of how the indices ended. The
// home carries them out (internal/agent/launch, control); the CLI parses
// the same references. It does no I/O and reads no clock.
//
// A sweep is its jobs: each home record carries the sweep's id, its index
// and the sweep's settings, and there is no record of the sweep apart
// from them, so nothing can disagree with them, and a purge that removes
// the jobs removes the sweep.
package sweep

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// A sweep's id is HOME:SEQ, a number of the home's job sequence, taken
// for the sweep and never given to a job: HOME.SEQ never names a job, so
// a sweep id typed with a dot for the colon is refused as an unknown
// job, never taken for another one. The colon is in no node id nor job
// id (migrate's nodePattern).
const sep = ":"

// ID is the sweep id of sequence number seq at home.
func ID(home string, seq uint64) string { return home + sep + strconv.FormatUint(seq, 10) }

// Home is the home node of a sweep id.
func Home(id string) (string, bool) {
	home, seq, ok := strings.Cut(id, sep)
	if !ok || home == "" || !validNode(home) {
		return "", false
	}
	if _, err := strconv.ParseUint(seq, 10, 64); err != nil {
		return "", false
	}
	return home, true
}

// Seq is the sequence number of a sweep id (HOME:SEQ).
func Seq(id string) (uint64, bool) {
	if _, ok := Home(id); !ok {
		return 0, false
	}
	_, seq, _ := strings.Cut(id, sep)
	n, err := strconv.ParseUint(seq, 10, 64)
	return n, err == nil
}

// validNode is migrate's node id pattern, [A-Za-z0-9][A-Za-z0-9.-]{0,62},
// without the regexp.
func validNode(s string) bool {
	if len(s) == 0 || len(s) > 63 {
		return false
	}
	for i, c := range s {
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || (c != '.' && c != '-')) {
			return false
		}
	}
	return true
}

// MaxIndices bounds the indices one reference names and one sweep holds
// (limits.run_count is below it on any node).
const MaxIndices = 1 << 20

// Ref is a reference to a sweep, or to some of its indices:
// SWEEP, SWEEP:RANGES or SWEEP[RANGES], RANGES being N or N-M separated
// by commas (n1:14:3-7,9). The colon form needs no quotes in a shell;
// the brackets are Slurm's (and a glob: quote them).
type Ref struct {
	Sweep string
	// Indices are those named, sorted, each once; nil names them all.
	Indices []int
}

// IsRef says whether s is meant as a sweep reference (it has the
// sweep's colon), to tell it from a job id before parsing.
func IsRef(s string) bool { return strings.Contains(s, sep) }

// ParseRef reads a sweep reference.
func ParseRef(s string) (Ref, error) {
	id, ranges := s, ""
	if i := strings.IndexByte(s, '['); i >= 0 {
		if !strings.HasSuffix(s, "]") {
			return Ref{}, fmt.Errorf("%q: an index range in brackets ends with ]", s)
		}
		id, ranges = s[:i], s[i+1:len(s)-1]
		if ranges == "" {
			return Ref{}, fmt.Errorf("%q: no index in the brackets", s)
		}
	} else if i := strings.Index(s, sep); i >= 0 {
		if j := strings.Index(s[i+1:], sep); j >= 0 {
			id, ranges = s[:i+1+j], s[i+2+j:]
			if ranges == "" {
				return Ref{}, fmt.Errorf("%q: no index after the second colon", s)
			}
		}
	}
	if _, ok := Home(id); !ok {
		return Ref{}, fmt.Errorf("%q is not a sweep id (HOMENODE:SEQ, e.g. n1:14, with :RANGES or [RANGES] for some of its indices)", id)
	}
	r := Ref{Sweep: id}
	if ranges == "" {
		return r, nil
	}
	idx, err := ParseRanges(ranges)
	if err != nil {
		return Ref{}, fmt.Errorf("%q: %v", s, err)
	}
	r.Indices = idx
	return r, nil
}

// String is the reference as ParseRef reads it, in the colon form.
func (r Ref) String() string {
	if r.Indices == nil {
		return r.Sweep
	}
	return r.Sweep + sep + Ranges(r.Indices)
}

// ParseRanges reads "3-7,9" into the indices it names, sorted, each once.
func ParseRanges(s string) ([]int, error) {
	seen := map[int]bool{}
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err1 := strconv.Atoi(lo)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.Atoi(hi)
		}
		switch {
		case err1 != nil || err2 != nil || a < 0 || b < 0:
			return nil, fmt.Errorf("%q is not an index nor a range N-M of indices", part)
		case b < a:
			return nil, fmt.Errorf("range %q runs backwards", part)
		case b-a >= MaxIndices || len(out)+(b-a+1) > MaxIndices:
			return nil, fmt.Errorf("more than %d indices", MaxIndices)
		}
		for i := a; i <= b; i++ {
			if !seen[i] {
				seen[i] = true
				out = append(out, i)
			}
		}
	}
	sort.Ints(out)
	return out, nil
}

// Ranges writes sorted indices compactly: 0-3,7,9-10.
func Ranges(idx []int) string {
	var b strings.Builder
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(idx[i]))
		if j > i {
			b.WriteString("-" + strconv.Itoa(idx[j]))
		}
		i = j + 1
	}
	return b.String()
}

// Args-from's bounds: a line, and the lines of one file. The run's other
// bounds (limits.arg_bytes, run_bytes) hold the commands made of them.
const (
	MaxLine  = 64 << 10
	MaxLines = MaxIndices
)

// CheckLines checks the lines of --args-from FILE: no NUL (an argument
// cannot hold one), none longer than MaxLine; the error starts with what
// (the flag and its file, or the request's field) and names the line.
func CheckLines(what string, lines []string) error {
	if len(lines) > MaxLines {
		return fmt.Errorf("%s: %d lines, more than %d", what, len(lines), MaxLines)
	}
	for i, l := range lines {
		switch {
		case len(l) > MaxLine:
			return fmt.Errorf("%s: line %d is %d bytes, more than %d", what, i+1, len(l), MaxLine)
		case strings.IndexByte(l, 0) >= 0:
			return fmt.Errorf("%s: line %d holds a NUL byte, which no argument can", what, i+1)
		}
	}
	return nil
}
