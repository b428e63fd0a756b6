// Package slurm decides whether a `roam run` may serve a Slurm allocation,
// and what of a node that allocation holds. It is pure: it reads the text
// Slurm's tools print and the caller's /proc/PID/cgroup as they are handed
// to it, and runs nothing (package scontrol is the thin call of scontrol).
//
// How an agent learns of an allocation (docs/slurm.md says why): the roam
// CLI sends the SLURM_JOB_ID it runs under; the agent believes none of it.
// The job must be one the kernel shows the caller inside (its cgroup on this
// node, which Slurm made and the caller cannot leave for another job's),
// and one the controller reports running, of the caller's uid, with this
// node among its nodes. Every node of such a job has its extern step (Slurm's
// PrologFlags=Contain) from the job's start to its end: the group roam adopts
// its processes into there, as pam_slurm_adopt does, so that Slurm counts
// them, its limits hold them and its end of the job ends them.
package slurm

import (
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Field is the name errors give the job id by: the variable the caller's
// environment had.
const Field = "SLURM_JOB_ID"

// MaxNodes bounds a host list's expansion: a larger allocation than any
// machine room holds is refused, not expanded.
const MaxNodes = 65536

// MaxLine bounds the scontrol output parsed.
const MaxLine = 1 << 20

// ErrRefused is the kind of every refusal here.
var ErrRefused = errors.New("slurm")

func refuse(format string, a ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrRefused, Field, fmt.Sprintf(format, a...))
}

var jobIDPattern = regexp.MustCompile(`^[1-9][0-9]{0,9}$`)

// ValidJobID checks a job id as a caller sends it: a number of at most ten
// digits (an array task's own id, as SLURM_JOB_ID holds it, is one too).
func ValidJobID(id string) error {
	if !jobIDPattern.MatchString(id) {
		return refuse("%q is not a Slurm job id (1 to 10 digits)", trim(id))
	}
	return nil
}

func trim(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// NodeAlloc is what a job holds on one node.
type NodeAlloc struct {
	CPUs  int
	MemMB int
}

// Job is what the controller says of a job (`scontrol show job -o -d ID`).
type Job struct {
	ID string
	// ArrayJob and ArrayTask are set for a task of an array: Slurm
	// 22.05 signals such a task by ARRAYJOB_ARRAYTASK only (Name).
	ArrayJob, ArrayTask string
	UID                 int
	State               string   // RUNNING, PENDING, COMPLETING, ...
	Nodes               []string // expanded NodeList, in Slurm's order
	// Alloc is each node's share, from the detail entries (-d).
	Alloc map[string]NodeAlloc
}

// Name is how scancel and scontrol name the job: ARRAYJOB_ARRAYTASK for a
// task of an array, else its id.
func (j Job) Name() string {
	if j.ArrayJob != "" && j.ArrayTask != "" {
		return j.ArrayJob + "_" + j.ArrayTask
	}
	return j.ID
}

// Has reports whether node is one of the job's.
func (j Job) Has(node string) bool { return slices.Contains(j.Nodes, node) }

// FindJob picks job id's line out of `scontrol show job -o -d ID`, which
// prints a line for every task of an array when ID is the array's (the
// array's id is also one of its tasks' own), and parses it.
func FindJob(out, id string) (Job, error) {
	if len(out) > MaxLine {
		return Job{}, fmt.Errorf("scontrol: %d bytes of output, more than %d", len(out), MaxLine)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "JobId="+id+" ") {
			return ParseShowJob(l)
		}
	}
	return Job{}, refuse("job %s: scontrol reports no such job", id)
}

// ParseShowJob parses one job's line of `scontrol show job -o -d ID`.
func ParseShowJob(line string) (Job, error) {
	if len(line) > MaxLine {
		return Job{}, fmt.Errorf("scontrol: %d bytes of output, more than %d", len(line), MaxLine)
	}
	j := Job{UID: -1, Alloc: map[string]NodeAlloc{}}
	var detail []string // the current Nodes=... CPU_IDs=... Mem=... entry
	flush := func() error {
		if len(detail) == 0 {
			return nil
		}
		err := j.addDetail(detail)
		detail = nil
		return err
	}
	for _, kv := range fields(strings.TrimSpace(line)) {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "JobId":
			j.ID = v
		case "ArrayJobId":
			j.ArrayJob = v
		case "ArrayTaskId":
			j.ArrayTask = v
		case "UserId": // name(uid)
			open, closing := strings.LastIndexByte(v, '('), strings.LastIndexByte(v, ')')
			if open < 0 || closing < open {
				return Job{}, fmt.Errorf("scontrol: UserId %q is not NAME(UID)", trim(v))
			}
			uid, err := strconv.Atoi(v[open+1 : closing])
			if err != nil || uid < 0 {
				return Job{}, fmt.Errorf("scontrol: UserId %q is not NAME(UID)", trim(v))
			}
			j.UID = uid
		case "JobState":
			j.State = v
		case "NodeList":
			if v == "" || v == "(null)" {
				continue
			}
			nodes, err := ExpandHostlist(v)
			if err != nil {
				return Job{}, err
			}
			j.Nodes = nodes
		case "Nodes":
			if err := flush(); err != nil {
				return Job{}, err
			}
			detail = []string{kv}
		case "CPU_IDs", "Mem":
			if detail != nil {
				detail = append(detail, kv)
			}
		}
	}
	if err := flush(); err != nil {
		return Job{}, err
	}
	if j.ID == "" || j.UID < 0 || j.State == "" {
		return Job{}, fmt.Errorf("scontrol: no JobId, UserId and JobState in %q", trim(line))
	}
	return j, nil
}

// fields splits scontrol's KEY=VALUE line; a word without "=" belongs to
// the value before it (a job name or command with spaces).
func fields(s string) []string {
	var out []string
	for _, w := range strings.Fields(s) {
		if !strings.Contains(w, "=") && len(out) > 0 {
			out[len(out)-1] += " " + w
			continue
		}
		out = append(out, w)
	}
	return out
}

// addDetail records one detail entry: Nodes=LIST CPU_IDs=RANGES Mem=MB.
func (j *Job) addDetail(kvs []string) error {
	var nodes []string
	var a NodeAlloc
	for _, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		var err error
		switch k {
		case "Nodes":
			nodes, err = ExpandHostlist(v)
		case "CPU_IDs":
			a.CPUs, err = countRanges(v)
		case "Mem":
			a.MemMB, err = strconv.Atoi(v)
		}
		if err != nil {
			return fmt.Errorf("scontrol: %s: %w", trim(kv), err)
		}
	}
	for _, n := range nodes {
		j.Alloc[n] = a
	}
	return nil
}

// countRanges counts the ids in a list such as 0-3,8,10-11.
func countRanges(s string) (int, error) {
	n := 0
	for _, r := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err := strconv.Atoi(lo)
		if err != nil {
			return 0, fmt.Errorf("%q is not a list of ids", trim(s))
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return 0, fmt.Errorf("%q is not a list of ids", trim(s))
			}
		}
		n += b - a + 1
		if n > MaxNodes {
			return 0, fmt.Errorf("%q names more than %d ids", trim(s), MaxNodes)
		}
	}
	return n, nil
}

// ExpandHostlist expands a Slurm host list: n[1-3,05],login,x[1-2]y.
func ExpandHostlist(s string) ([]string, error) {
	var out []string
	for len(s) > 0 {
		// One item: up to a comma outside brackets.
		depth, end := 0, len(s)
		for i, c := range s {
			if c == '[' {
				depth++
			} else if c == ']' {
				depth--
			} else if c == ',' && depth == 0 {
				end = i
				break
			}
		}
		item := s[:end]
		s = strings.TrimPrefix(s[end:], ",")
		names, err := expandItem(item)
		if err != nil {
			return nil, fmt.Errorf("host list %q: %w", trim(item), err)
		}
		out = append(out, names...)
		if len(out) > MaxNodes {
			return nil, fmt.Errorf("host list names more than %d nodes", MaxNodes)
		}
	}
	return out, nil
}

// expandItem expands one name with at most one bracket: pre[ranges]post.
func expandItem(item string) ([]string, error) {
	open := strings.IndexByte(item, '[')
	if open < 0 {
		if item == "" || strings.ContainsAny(item, "]") {
			return nil, errors.New("not a host name")
		}
		return []string{item}, nil
	}
	closing := strings.IndexByte(item, ']')
	if closing < open || strings.ContainsAny(item[closing+1:], "[]") {
		return nil, errors.New("unbalanced brackets")
	}
	pre, body, post := item[:open], item[open+1:closing], item[closing+1:]
	var out []string
	for _, r := range strings.Split(body, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		if !isRange {
			hi = lo
		}
		a, err1 := strconv.Atoi(lo)
		b, err2 := strconv.Atoi(hi)
		if err1 != nil || err2 != nil || b < a || b-a > MaxNodes {
			return nil, fmt.Errorf("%q is not a range", r)
		}
		for i := a; i <= b; i++ {
			out = append(out, fmt.Sprintf("%s%0*d%s", pre, len(lo), i, post))
		}
	}
	return out, nil
}

// cgroupJob matches Slurm's group of a job in a cgroup path:
// .../uid_U/job_J/... (v1, under slurm or slurm_NODE; v2, under the
// slurmd's own).
var cgroupJob = regexp.MustCompile(`/uid_([0-9]+)/job_([0-9]+)(/|$)`)

// JobOfCgroup reads, from a process's /proc/PID/cgroup, the Slurm job whose
// group it is in: its freezer hierarchy's (where Slurm's v1 proctrack keeps
// a job's processes), or the v2 one's.
func JobOfCgroup(procCgroup string) (uid int, job string, ok bool) {
	for _, l := range strings.Split(procCgroup, "\n") {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 {
			continue
		}
		if parts[1] != "freezer" && !(parts[0] == "0" && parts[1] == "") {
			continue
		}
		if m := cgroupJob.FindStringSubmatch(parts[2]); m != nil {
			u, err := strconv.Atoi(m[1])
			if err == nil {
				return u, m[2], true
			}
		}
	}
	return 0, "", false
}

// Check decides whether a caller of uid, whose process the kernel shows in
// job callerJob's group on this node (JobOfCgroup; "" when in none), may
// run in job j on node: only when it is j, j is the caller's and running,
// and node is one of j's.
func Check(j Job, callerUID int, callerJob, node string) error {
	switch {
	case callerJob == "":
		return refuse("job %s: the caller runs in no Slurm job on this node (run roam inside the job's batch script or an srun of it)", j.ID)
	case callerJob != j.ID:
		return refuse("job %s: the caller runs in Slurm job %s on this node", j.ID, callerJob)
	case j.UID != callerUID:
		return refuse("job %s is not the caller's", j.ID)
	case j.State != "RUNNING":
		return refuse("job %s is %s, not RUNNING", j.ID, j.State)
	case !j.Has(node):
		return refuse("job %s has no node %s (its nodes: %s)", j.ID, node, strings.Join(j.Nodes, ","))
	}
	return nil
}

// ExternDir is job's extern step's group under one hierarchy's Slurm root
// (mount/slurm on a node with one slurmd): where roam adopts the job's
// processes on a node of the allocation.
func ExternDir(slurmRoot string, uid int, job string) string {
	return path.Join(slurmRoot, fmt.Sprintf("uid_%d", uid), "job_"+job, "step_extern")
}
