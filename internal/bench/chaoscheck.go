package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"roam/internal/api"
	"roam/internal/emu"
	"roam/internal/procfs"
)

// The invariants of the chaos run, checked after every step:
//   - no job lost: every job runs, or has finished with status 0 and
//     counted to its end (a job is lost when it neither finishes nor is
//     restarted);
//   - none run twice: never two copies of a job that can run, and its
//     file counts up by one, falling back only once per restart;
//   - every record, at the job's home, names the node where its one copy
//     runs (the roam-init processes of the cluster, by their spool);
//   - every agent within ChaosSpec's bounds of memory and descriptors.
// A check waits for the cluster to settle (a migration's source copy
// going, a restart under way), up to settleLimit; what is still wrong
// then is a violation. Two running copies, or a file where two copies
// interleave, are one at once.

// settleLimit bounds the wait for every record to agree with the
// processes after a step: past a fenced node's kill and margin and the
// restart, with room for a loaded machine.
const settleLimit = 90 * time.Second

// ErrInterleave is a file whose numbers two copies wrote.
var ErrInterleave = errors.New("two copies interleave")

// copyOf is a roam-init process of a job.
type copyOf struct {
	Pid     int
	Node    string
	State   byte
	Running bool // not stopped, not exiting
}

// settle waits until every invariant holds, and fails at once on two
// running copies or interleaved numbers.
func (x *chaos) settle() error {
	deadline := time.Now().Add(settleLimit)
	for {
		why, err := x.checkOnce()
		if err != nil {
			return err
		}
		if why == "" {
			return nil
		}
		if time.Now().After(deadline) {
			if strings.Contains(why, "lost") {
				x.res.Lost++
			}
			quitAgents(x.spec.Name) // what each agent was doing, in its log
			return x.violation("not settled after %v: %s (each agent's goroutines are in its log)", settleLimit, why)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// checkOnce checks the invariants once: why says what is not settled
// yet, err is a violation.
func (x *chaos) checkOnce() (why string, err error) {
	if err := x.checkAgents(); err != nil {
		return "", err
	}
	recs, err := x.records()
	if err != nil {
		return err.Error(), nil
	}
	cps, err := x.copies()
	if err != nil {
		return "", err
	}
	var whys []string
	for _, id := range x.jobIDs() {
		j := x.jobs[id]
		if j.over {
			if len(cps[id]) > 0 {
				whys = append(whys, fmt.Sprintf("%s finished, copies %v", id, cps[id]))
			}
			continue
		}
		r, ok := recs[id]
		if !ok {
			whys = append(whys, id+" not in ps")
			continue
		}
		j.rec = r
		w, err := x.checkJob(j, cps[id])
		if err != nil {
			return "", err
		}
		if w != "" {
			whys = append(whys, w)
		}
	}
	return strings.Join(whys, "; "), nil
}

// checkJob checks one job against its record and its copies.
func (x *chaos) checkJob(j *chaosJob, cps []copyOf) (string, error) {
	b, _ := os.ReadFile(j.file)
	last, lerr := CheckLines(b, j.restartPoints())
	if errors.Is(lerr, ErrInterleave) {
		x.res.RunTwice++
		return "", x.violation("job %s (%s): %v", j.id, j.file, lerr)
	}
	var run []copyOf
	for _, c := range cps {
		if c.Running {
			run = append(run, c)
		}
	}
	if len(run) > 1 {
		time.Sleep(20 * time.Millisecond) // a copy CRIU has just killed may not show it yet: see e2e's watchCopies
		var still []copyOf
		for _, c := range run {
			if liveCopy(c.Pid) {
				still = append(still, c)
			}
		}
		if len(still) > 1 {
			x.res.RunTwice++
			return "", x.violation("job %s runs twice: copies %v, record %s on %s", j.id, still, j.rec.State, j.rec.Node)
		}
	}
	// The owner sees no processes, only the record: the home's refusal
	// of a restart while the job's node may still run it is what keeps
	// the copies apart, and the watch above checks it.
	if move := ownerDecision(j.rec, j.owner != nil); move != ownerNone && lerr == nil {
		return x.playOwner(j, move)
	}
	switch r := j.rec; {
	case lerr != nil:
		return fmt.Sprintf("%s: %v", j.id, lerr), nil
	case r.State == api.StateRunning:
		if len(cps) != 1 || !cps[0].Running || cps[0].Node != r.Node {
			return fmt.Sprintf("%s runs on %s by its record, copies %v", j.id, r.Node, cps), nil
		}
	case r.State == api.StateFinished:
		if r.ExitCode == nil || *r.ExitCode != 0 {
			return "", x.violation("job %s ended with status %v (%q) on node %s, copies %v, its file at %d, stderr %q", j.id, exitText(r.ExitCode), r.EndReason, r.Node, cps, last, tail(x.stderrOf(j)))
		}
		if last != x.spec.Lines {
			return "", x.violation("job %s finished with its file at %d, not %d", j.id, last, x.spec.Lines)
		}
		if len(cps) > 0 {
			return fmt.Sprintf("%s finished, copies %v", j.id, cps), nil
		}
		j.over = true
		x.res.JobsFinished++
	default:
		return fmt.Sprintf("%s %s on %s", j.id, r.State, r.Node), nil
	}
	return "", nil
}

// exitText is an exit status or "none".
func exitText(c *int) string {
	if c == nil {
		return "none"
	}
	return strconv.Itoa(*c)
}

// stderrOf is a job's standard error, for a violation's message.
func (x *chaos) stderrOf(j *chaosJob) string {
	var o api.Output
	_ = x.root[x.node(j.home)].Get(api.Fill(api.PathJobOutput, j.id), &o)
	return string(o.Stderr)
}

// jobIDs are the jobs' ids, sorted.
func (x *chaos) jobIDs() []string {
	var ids []string
	for id := range x.jobs {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// records reads every job's record from its home: each home's own ps.
func (x *chaos) records() (map[string]api.Job, error) {
	out := map[string]api.Job{}
	for i, n := range x.st.Nodes {
		var js []api.Job
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err := x.root[i].Do(ctx, "GET", api.PathPS+"?all=1", nil, &js)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("ps on node %s: %v", n.ID, err)
		}
		for _, j := range js {
			if j.Home == n.ID {
				out[j.ID] = j
			}
		}
	}
	return out, nil
}

// copies lists the cluster's job copies by job id: the processes that
// are roam-init (PID 1 of their namespace) in a job's cgroup,
// roam/NAME/nN/jobs/ID, whatever the controllers. (Not ckpt.Inits: the
// CLI, which runs this, links no daemon code.)
func (x *chaos) copies() (map[string][]copyOf, error) {
	re := regexp.MustCompile(`(?m)/roam/` + regexp.QuoteMeta(x.spec.Name) + `/n([0-9]+)/jobs/([^/\s]+)$`)
	out := map[string][]copyOf{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if comm, _ := os.ReadFile("/proc/" + e.Name() + "/comm"); string(comm) != "roam-init\n" || !pidOne(pid) {
			continue
		}
		cg, _ := os.ReadFile("/proc/" + e.Name() + "/cgroup")
		m := re.FindSubmatch(cg)
		st, err := procfs.ReadStat(pid)
		if m == nil || err != nil || st.State == 'Z' {
			continue
		}
		c := copyOf{Pid: pid, Node: string(m[1]), State: st.State}
		c.Running = st.State != 'T' && st.State != 't' && liveCopy(pid)
		out[string(m[2])] = append(out[string(m[2])], c)
	}
	return out, nil
}

// pidOne says whether pid is PID 1 of its PID namespace: a job's
// roam-init, not a child it forked that has not executed its program yet.
func pidOne(pid int) bool {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "NSpid:"); ok {
			f := strings.Fields(rest)
			return len(f) > 1 && f[len(f)-1] == "1"
		}
	}
	return false
}

// liveCopy says whether pid can still run: present, not a zombie, not
// exiting, no SIGKILL pending.
func liveCopy(pid int) bool {
	st, err := procfs.ReadStat(pid)
	if err != nil || st.State == 'Z' || st.Flags&procfs.PFExiting != 0 {
		return false
	}
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	for _, l := range strings.Split(string(b), "\n") {
		for _, k := range []string{"ShdPnd:", "SigPnd:"} {
			if v, ok := strings.CutPrefix(l, k); ok {
				if m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && m&(1<<8) != 0 {
					return false
				}
			}
		}
	}
	return true
}

// checkAgents samples every agent's resident memory and descriptors, and
// fails past the bounds.
func (x *chaos) checkAgents() error {
	st, err := emu.Load(x.spec.Name)
	if err != nil {
		return err
	}
	for _, n := range st.Nodes {
		rss, fds, err := agentUse(n.PID)
		if err != nil {
			continue // between a kill and its start
		}
		x.res.MaxRSSMB = max(x.res.MaxRSSMB, rss)
		x.res.MaxFDs = max(x.res.MaxFDs, fds)
		if rss > float64(x.spec.MaxRSSMB) || fds > x.spec.MaxFDs {
			return x.violation("node %s's agent holds %.0f MiB and %d descriptors (bounds %d MiB, %d)", n.ID, rss, fds, x.spec.MaxRSSMB, x.spec.MaxFDs)
		}
	}
	return nil
}

// agentUse is a process's resident memory in MiB and its descriptors.
func agentUse(pid int) (float64, int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, err
	}
	rss := 0.0
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			rss = kb / 1024
		}
	}
	fds, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	return rss, len(fds), err
}

// finish lets the last jobs run to their end, checking as they go.
func (x *chaos) finish() error {
	deadline := time.Now().Add(time.Duration(x.spec.Lines)*300*time.Millisecond + 2*time.Minute)
	for {
		if err := x.settle(); err != nil {
			return err
		}
		left := 0
		for _, j := range x.jobs {
			if !j.over {
				left++
			}
		}
		if left == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return x.violation("%d jobs not finished by the end", left)
		}
		time.Sleep(time.Second)
	}
}

func (c copyOf) String() string {
	return fmt.Sprintf("pid %d on node %s (%c)", c.Pid, c.Node, c.State)
}
