// Package procfs reads /proc: a process's stat and status files, its
// threads' credentials, its tree of children. It only reads; the parsing
// of status files, which the pure core needs too, is in proctext.
package procfs

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"

	"roam/internal/proctext"
)

// UserHZ is the unit of the tick fields below on Linux.
const UserHZ = 100

// Stat is the part of /proc/PID/stat roam uses.
type Stat struct {
	State     byte   // R, S, D, Z, T (stopped), ...
	Flags     uint64 // the kernel's PF_* flags
	UTime     uint64 // ticks in user mode
	STime     uint64 // ticks in kernel mode
	CUTime    uint64 // ticks of waited-for children, user mode
	CSTime    uint64 // ticks of waited-for children, kernel mode
	StartTime uint64 // ticks after boot when the process started
	Nice      int    // -20 (first) to 19 (last)
}

// ErrFormat means the file did not have the expected fields.
var ErrFormat = errors.New("procfs: unexpected /proc/PID/stat format")

// ReadStat reads /proc/PID/stat; an error when the process is gone.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, err
	}
	return parseStat(b)
}

func parseStat(b []byte) (Stat, error) {
	// The command name is in parentheses and may hold anything, spaces
	// and ')' included, so the fields start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return Stat{}, ErrFormat
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime is field 14, nice 19, starttime 22.
	if len(f) < 20 || len(f[0]) != 1 {
		return Stat{}, ErrFormat
	}
	n := func(k int) uint64 { v, _ := strconv.ParseUint(f[k], 10, 64); return v }
	nice, _ := strconv.Atoi(f[16])
	return Stat{State: f[0][0], Flags: n(6), UTime: n(11), STime: n(12), CUTime: n(13), CSTime: n(14), StartTime: n(19), Nice: nice}, nil
}

// PFExiting is the flag of a process that is exiting (killed, and freeing
// its memory): it may still show as running.
const PFExiting = 0x4

// Running reports whether pid is a live process, not a zombie.
func Running(pid int) bool {
	st, err := ReadStat(pid)
	return err == nil && st.State != 'Z'
}

// Tree lists a process and all its descendants, parents before children
// (a job's whole namespace, from its roam-init). Processes that end during
// the walk are skipped.
func Tree(pid int) []int {
	var out []int
	seen := map[int]bool{}
	var walk func(p int)
	walk = func(p int) {
		if seen[p] || len(seen) > 100000 {
			return
		}
		seen[p] = true
		out = append(out, p)
		tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(p) + "/task")
		for _, t := range tasks {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(p) + "/task/" + t.Name() + "/children")
			for _, c := range strings.Fields(string(b)) {
				if n, err := strconv.Atoi(c); err == nil {
					walk(n)
				}
			}
		}
	}
	walk(pid)
	return out
}

// ReadInt reads a file that holds one integer (a /proc/sys setting).
func ReadInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// Children are pid's child processes (of all its threads).
func Children(pid int) []int {
	var out []int
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, _ := os.ReadDir(dir)
	for _, t := range tasks {
		b, err := os.ReadFile(dir + t.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			if n, err := strconv.Atoi(f); err == nil {
				out = append(out, n)
			}
		}
	}
	return out
}

// NSPid is a process's pid in its innermost pid namespace (a job's pid,
// which a migration keeps), from the NSpid line of its status.
func NSPid(pid int) (int, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, false
	}
	return proctext.ParseNSPid(string(b))
}

// HeldBy says whether every thread of process pid is stopped by tracer
// (ptrace's tracing stop, as CRIU's worker holds a job it dumps).
func HeldBy(pid, tracer int) bool {
	dir := "/proc/" + strconv.Itoa(pid) + "/task/"
	tasks, err := os.ReadDir(dir)
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, t := range tasks {
		b, err := os.ReadFile(dir + t.Name() + "/status")
		if err != nil {
			return false
		}
		if st, tp := proctext.ParseTrace(string(b)); st != 't' || tp != tracer {
			return false
		}
	}
	return true
}
