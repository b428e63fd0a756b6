// Package resources is what a job asks of the node it runs on (roam run
// --cpus and --mem): the request's form on the wire and in records, its
// parsing from the command line, its bounds, and what follows from it
// alone (the slots it counts, its CPU quota, the thread counts of its
// environment). The node's side (its memory for jobs, the requests it
// holds) is package sched's; the cgroup files are package cgroup's.
//
// It is pure: no I/O, no clock. Everything a peer or a user sends is
// checked here (Check) before a record keeps it.
package resources

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"roam/internal/errkind"
)

// Request is a job's resource request. It travels with the job wherever
// it goes (its records, a migration's header, a checkpoint), so that every
// node it runs on limits it alike.
type Request struct {
	// MilliCPUs is --cpus in thousandths of a CPU: the job's CPU limit
	// (a CFS quota of that many CPUs), the threads its environment asks
	// of numerical libraries, and the slots it counts toward a node's
	// load (Slots). 0 only in the records of an older roam: no limit.
	MilliCPUs int64 `json:"milli_cpus,omitempty"`
	// MemBytes is --mem: the most memory the job's cgroup may hold (its
	// processes' pages, its /tmp), and what a node must have room for to
	// take it. 0: none asked; the job is bounded by the node's memory
	// for jobs only, and counts nothing toward it.
	MemBytes int64 `json:"mem_bytes,omitempty"`
}

// Bounds of a request, named once.
const (
	// MilliPerCPU is a CPU in the unit of MilliCPUs.
	MilliPerCPU = 1000
	// MinMilliCPUs is the least --cpus: 0.01 CPU, a quota of 1 ms in the
	// 100 ms period, the kernel's least quota.
	MinMilliCPUs = 10
	// MaxMilliCPUs is the most --cpus: 4096 CPUs, the largest node
	// capacity a load message carries (load.DecodeMessage).
	MaxMilliCPUs = 4096 * MilliPerCPU
	// MinMemBytes is the least --mem: the job's roam-init, its program's
	// first pages and the restore of a migration (CRIU's restorer runs in
	// the job's memory group) need a few MiB before the program's own.
	MinMemBytes = 8 << 20
	// MaxMemBytes is the most --mem a request may carry at all: 1 PiB.
	// A request larger than any node's memory for jobs is refused by
	// placement (sched.FitsNowhere), which knows the nodes.
	MaxMemBytes = 1 << 50
)

// ErrBad is the kind of every error of a request's check or parse.
var ErrBad = errors.New("bad resource request")

// Check refuses a request out of bounds: from a user, a record, a peer.
// Zero fields pass (none asked, or an older roam's record).
func (r Request) Check() error {
	if r.MilliCPUs != 0 && (r.MilliCPUs < MinMilliCPUs || r.MilliCPUs > MaxMilliCPUs) {
		return errkind.New(ErrBad, "--cpus %s is out of range (%s to %s)", FormatCPUs(r.MilliCPUs), FormatCPUs(MinMilliCPUs), FormatCPUs(MaxMilliCPUs))
	}
	if r.MemBytes != 0 && (r.MemBytes < MinMemBytes || r.MemBytes > MaxMemBytes) {
		return errkind.New(ErrBad, "--mem %s is out of range (%s to %s)", FormatMem(r.MemBytes), FormatMem(MinMemBytes), FormatMem(MaxMemBytes))
	}
	return nil
}

// Slots is how many CPUs the job counts for where placement counts jobs
// (sched.Place): its --cpus rounded up, at least one. A job of --cpus 2
// runs two threads (OMP_NUM_THREADS=2) and takes two of a node's runnable
// threads; one of --cpus 0.5 still runs a thread, which the node's
// measured load counts whole.
func (r Request) Slots() int {
	return max(int((r.MilliCPUs+MilliPerCPU-1)/MilliPerCPU), 1)
}

// MemMB is the memory request in MiB (0: none).
func (r Request) MemMB() float64 { return float64(r.MemBytes) / (1 << 20) }

// QuotaBinds says whether the job's CPU limit is less than what a node of
// capacity cores could give it: only then does its cgroup get a quota of
// its own. A quota at or above the node's own would limit nothing, and a
// CPU group of its own makes the job a scheduling entity of its own under
// the node's quota (cgroup.Jobs.Enter).
func (r Request) QuotaBinds(capacity float64) bool {
	return r.MilliCPUs > 0 && float64(r.MilliCPUs) < capacity*MilliPerCPU-0.5
}

// String is the request as roam run takes it ("--cpus 0.5 --mem 64M"),
// "" when nothing is asked.
func (r Request) String() string {
	var parts []string
	if r.MilliCPUs > 0 {
		parts = append(parts, "--cpus "+FormatCPUs(r.MilliCPUs))
	}
	if r.MemBytes > 0 {
		parts = append(parts, "--mem "+FormatMem(r.MemBytes))
	}
	return strings.Join(parts, " ")
}

// ThreadVars are the variables that set how many threads OpenMP and the
// BLAS libraries start: by default one a core of the machine, which a
// job limited to a few CPUs would run time-sliced on them.
var ThreadVars = []string{"OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"}

// ThreadEnv is env with each of ThreadVars the user did not set set to
// the job's --cpus rounded up; env unchanged when the request has no CPUs.
func ThreadEnv(env []string, r Request) []string {
	if r.MilliCPUs <= 0 {
		return env
	}
	set := map[string]bool{}
	for _, e := range env {
		k, _, _ := strings.Cut(e, "=")
		set[k] = true
	}
	out := env[:len(env):len(env)] // appends never write into the caller's array
	for _, v := range ThreadVars {
		if !set[v] {
			out = append(out, v+"="+strconv.Itoa(r.Slots()))
		}
	}
	return out
}

// ParseCPUs reads --cpus: a positive decimal number of CPUs with at most
// three decimals ("0.5", "2", "1.25"), within bounds.
func ParseCPUs(s string) (int64, error) {
	bad := errkind.New(ErrBad, "--cpus %q is not a number of CPUs such as 0.5 or 2", s)
	whole, frac, dot := strings.Cut(strings.TrimSpace(s), ".")
	if (whole == "" && frac == "") || len(frac) > 3 || (dot && frac == "") || !digits(whole) || !digits(frac) || len(whole) > 7 {
		return 0, bad
	}
	w, _ := strconv.ParseInt("0"+whole, 10, 64)
	f, _ := strconv.ParseInt((frac + "000")[:3], 10, 64)
	m := w*MilliPerCPU + f
	if err := (Request{MilliCPUs: m}).Check(); err != nil || m == 0 {
		return 0, errkind.New(ErrBad, "--cpus %s is out of range (%s to %s)", strings.TrimSpace(s), FormatCPUs(MinMilliCPUs), FormatCPUs(MaxMilliCPUs))
	}
	return m, nil
}

// ParseMem reads --mem as Slurm does: a whole number with an optional
// unit, K, M, G or T (powers of 1024; "MiB", "MB" and "m" read alike),
// MiB without one ("64M", "2G", "512"), within bounds.
func ParseMem(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && t[i] >= '0' && t[i] <= '9' {
		i++
	}
	num, unit := t[:i], strings.ToUpper(t[i:])
	if u, ok := strings.CutSuffix(unit, "B"); ok && u != "" {
		if len(u) == 2 && u[1] == 'I' {
			u = u[:1]
		}
		unit = u
	}
	shift, ok := map[string]uint{"": 20, "K": 10, "M": 20, "G": 30, "T": 40}[unit]
	if num == "" || !ok || len(num) > 16 {
		return 0, errkind.New(ErrBad, "--mem %q is not a size such as 64M or 2G (MiB without a unit)", s)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n > MaxMemBytes>>shift {
		return 0, errkind.New(ErrBad, "--mem %s is out of range (%s to %s)", t, FormatMem(MinMemBytes), FormatMem(MaxMemBytes))
	}
	b := n << shift
	if err := (Request{MemBytes: b}).Check(); err != nil || b == 0 {
		return 0, errkind.New(ErrBad, "--mem %s is out of range (%s to %s)", t, FormatMem(MinMemBytes), FormatMem(MaxMemBytes))
	}
	return b, nil
}

func digits(s string) bool {
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// FormatCPUs writes thousandths of a CPU as --cpus takes them ("0.5").
func FormatCPUs(milli int64) string {
	s := strconv.FormatInt(milli/MilliPerCPU, 10)
	if f := milli % MilliPerCPU; f != 0 {
		s += strings.TrimRight(fmt.Sprintf(".%03d", f), "0")
	}
	return s
}

// FormatMem writes bytes in the largest unit --mem takes that divides
// them ("64M", "2G", "1536K").
func FormatMem(b int64) string {
	for _, u := range []struct {
		shift uint
		name  string
	}{{40, "T"}, {30, "G"}, {20, "M"}, {10, "K"}} {
		if b > 0 && b%(1<<u.shift) == 0 {
			return strconv.FormatInt(b>>u.shift, 10) + u.name
		}
	}
	return strconv.FormatInt(b, 10) + "B"
}
