package bench

// One side of the sweep benchmark (sweep.go): its run under one policy,
// and what it measured.

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"net/http"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"roam/internal/api"
	"roam/internal/cgroup"
	"roam/internal/emu"
)

// sweepOutcome is one side's run: the submission's time, the jobs'
// records by index, and every node's peak memory.
type sweepOutcome struct {
	t0     time.Time
	jobs   []sweepJob
	recs   []api.Job
	peakMB []float64
	// busy is the CPU-seconds the machine was busy from the submission
	// to the last end, or taken by the VM's host (busyCPU).
	busy float64
}

// sweepSide runs the sweep once under the policy loaded: the background
// load on node 2, the user's submission, the wait for every job's end
// while every node's memory is sampled; then the user's records are
// purged and the nodes left to remove their groups.
func sweepSide(x *Run, st emu.State, cl *api.Client, args string, jobs []sweepJob, size sweepSize, round int) (sweepOutcome, error) {
	o := sweepOutcome{jobs: jobs}
	bg, err := start(cl, api.RunRequest{Argv: []string{x.tool("bgload"), strconv.Itoa(sweepBgProcs), fmt.Sprint(sweepBgMax), fmt.Sprint(size.limit.Seconds()), strconv.Itoa(round)}, On: "2", Pin: true})
	if err != nil {
		return o, fmt.Errorf("background load: %w", err)
	}
	peaks := sampleMemory(st)
	busy0 := busyCPU()
	ids, t0, err := sweepSubmit(x, st, args, len(jobs))
	if err == nil {
		o.t0 = t0
		o.recs, err = sweepWait(cl, ids, len(jobs), t0.Add(size.limit))
		// Read at the wait's end, up to a second after the last end.
		o.busy = busyCPU() - busy0
	}
	o.peakMB = peaks()
	kill(cl, bg)
	if err != nil {
		kill(cl, ids)
	}
	uid := BenchUser.UID
	if perr := cl.Do(context.Background(), http.MethodPost, api.PathPurge, api.PurgeRequest{UID: &uid}, nil); perr != nil && err == nil {
		err = fmt.Errorf("purge: %w", perr)
	}
	settle(x, st)
	return o, err
}

// sweepSubmit is the user's roam run of the sweep, detached; it returns
// the jobs' ids and the time of the submission.
func sweepSubmit(x *Run, st emu.State, args string, n int) ([]string, time.Time, error) {
	cmd := exec.Command(x.tool("roam"), "--socket", st.Nodes[0].Socket, "run", "-d", "--args-from", args, "--mem", sweepMem, "--", x.tool("sweepjob"), "{1}", "{2}")
	cmd.Dir = "/"
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: BenchUser.UID, Gid: BenchUser.GID, Groups: BenchUser.Groups}}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	t0 := time.Now()
	if err := cmd.Run(); err != nil {
		return nil, t0, fmt.Errorf("roam run: %v: %s", err, strings.TrimSpace(errb.String()))
	}
	ids := strings.Fields(out.String())
	if len(ids) != n {
		return ids, t0, fmt.Errorf("roam run printed %d job ids, not %d", len(ids), n)
	}
	return ids, t0, nil
}

// sweepWait waits until every job of the sweep is over, and returns
// their records by index; every one must have ended with 0 as the user.
// It polls every second: a ps asks every node for hundreds of records.
func sweepWait(cl *api.Client, ids []string, n int, deadline time.Time) ([]api.Job, error) {
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	for {
		var js []api.Job
		over, left := 0, ""
		if err := cl.Get(api.PathPS+"?all=1", &js); err == nil {
			recs := make([]api.Job, n)
			for _, j := range js {
				if !want[j.ID] || j.Index == nil || *j.Index < 0 || *j.Index >= n {
					continue
				}
				recs[*j.Index] = j
				if j.State == api.StateFinished || j.State == api.StateLost {
					over++
				} else if left == "" {
					left = fmt.Sprintf("job %s (index %d) %s", j.ID, *j.Index, j.State)
				}
			}
			if over == n {
				return recs, sweepStatus(recs)
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d jobs not over at the side's limit (%s, ...)", n-over, n, left)
		}
		time.Sleep(time.Second)
	}
}

// sweepStatus fails unless every job ran as the user and ended with 0.
func sweepStatus(recs []api.Job) error {
	for i, j := range recs {
		if j.ExitCode == nil || *j.ExitCode != 0 || j.UID != BenchUser.UID {
			code := "no status"
			if j.ExitCode != nil {
				code = "status " + strconv.Itoa(*j.ExitCode)
			}
			return fmt.Errorf("index %d, job %s of uid %d: %s, %s (%s), not status 0 as uid %d", i, j.ID, j.UID, j.State, code, j.EndReason, BenchUser.UID)
		}
	}
	return nil
}

// sampleMemory samples every node's memory (its cgroup's usage, which
// the node's memory bounds) until the returned func is called, which
// returns each node's peak in MiB.
func sampleMemory(st emu.State) func() []float64 {
	peak := make([]float64, len(st.Nodes))
	l, err := cgroup.Detect()
	if err != nil {
		return func() []float64 { return peak }
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(sweepPoll)
		defer t.Stop()
		for {
			for i, nd := range st.Nodes {
				peak[i] = math.Max(peak[i], l.MemoryUsageMB(nd.Cgroup))
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() []float64 {
		close(done)
		wg.Wait()
		return peak
	}
}

// slowdown is index i's: (its end − the submission) / its CPU-seconds.
func (o sweepOutcome) slowdown(i int) float64 {
	return o.recs[i].Ended.Sub(o.t0).Seconds() / o.jobs[i].cpu
}

// stretch is index i's run alone: (its end − its start) / its
// CPU-seconds; its slowdown less its wait in the queue over its length.
func (o sweepOutcome) stretch(i int) float64 {
	return o.recs[i].Ended.Sub(o.recs[i].Started).Seconds() / o.jobs[i].cpu
}

func (o sweepOutcome) meanSlowdown() float64 {
	s := 0.0
	for i := range o.recs {
		s += o.slowdown(i)
	}
	return s / float64(len(o.recs))
}

// add records the side's measures under series.
func (o sweepOutcome) add(r *Result, series string, size sweepSize) {
	x := size.maxCPU
	n := len(o.recs)
	slow := make([]float64, n)
	var stretch, used, asked, ran float64
	var end time.Time
	moves, preempted := 0, 0
	for i, j := range o.recs {
		slow[i] = o.slowdown(i)
		stretch += o.stretch(i)
		used += j.CPUSeconds
		asked += o.jobs[i].cpu
		moves += j.Migrations
		if len(j.Restarts) > 0 {
			preempted++
		}
		ran += j.Ended.Sub(j.Started).Seconds()
		if j.Ended.After(end) {
			end = j.Ended
		}
	}
	ideal := used / capacitySum(sweepCaps())
	makespan := end.Sub(o.t0).Seconds()
	mean := o.meanSlowdown()
	sorted := slices.Sorted(slices.Values(slow))
	r.Add(series, x, "mean slowdown", "", mean)
	r.Add(series, x, "p99 slowdown", "", sorted[int(math.Ceil(0.99*float64(n)))-1])
	r.Add(series, x, "mean stretch", "", stretch/float64(n))
	r.Add(series, x, "makespan", "s", makespan)
	r.Add(series, x, "ideal", "s", ideal)
	r.Add(series, x, "makespan / ideal", "×", makespan/ideal)
	r.Add(series, x, "CPU used / asked", "", used/asked)
	r.Add(series, x, "migrations", "", float64(moves))
	r.Add(series, x, "preemptions", "", float64(preempted))
	r.Add(series, x, "most running at once", "", float64(mostRunning(o.recs)))
	// How full the queue kept the nodes, and what CPU the jobs had:
	// what the machine did besides (the agents, the background, anything
	// else running on it) is what they did not get.
	r.Add(series, x, "mean running", "", ran/makespan)
	r.Add(series, x, "mean running while some pending", "", runningWhilePending(o.recs))
	r.Add(series, x, "CPUs the jobs got", "CPUs", used/makespan)
	r.Add(series, x, "other CPUs busy", "CPUs", (o.busy-used)/makespan)
	for i, p := range o.peakMB {
		r.Add(series, x, fmt.Sprintf("peak memory, node %d", i+1), "MiB", p)
	}
	o.addBins(r, series, size, slow)
}

// addBins records the side's mean slowdown and stretch by job length,
// in size's bins.
func (o sweepOutcome) addBins(r *Result, series string, size sweepSize, slow []float64) {
	lo := 0.0
	for _, hi := range size.bins {
		var sl, st float64
		k := 0
		for i, j := range o.jobs {
			if j.cpu > lo && j.cpu <= hi {
				sl += slow[i]
				st += o.stretch(i)
				k++
			}
		}
		if k > 0 {
			r.Add(series, hi, "mean slowdown in the bin", "", sl/float64(k))
			r.Add(series, hi, "mean stretch in the bin", "", st/float64(k))
			r.Add(series, hi, "jobs in the bin", "", float64(k))
		}
		lo = hi
	}
}

// sweepCaps are the nodes' capacities by id.
func sweepCaps() map[string]float64 {
	caps := map[string]float64{}
	for i, c := range sweepCPU {
		caps[strconv.Itoa(i+1)] = c
	}
	return caps
}

// mostRunning is the most jobs that ran at once, from their records'
// starts and ends.
func mostRunning(recs []api.Job) int {
	type ev struct {
		at time.Time
		d  int
	}
	evs := make([]ev, 0, 2*len(recs))
	for _, j := range recs {
		evs = append(evs, ev{j.Started, 1}, ev{j.Ended, -1})
	}
	// An end before a start at the same instant: the room passed on.
	sort.Slice(evs, func(a, b int) bool {
		if !evs[a].at.Equal(evs[b].at) {
			return evs[a].at.Before(evs[b].at)
		}
		return evs[a].d < evs[b].d
	})
	most, now := 0, 0
	for _, e := range evs {
		now += e.d
		most = max(most, now)
	}
	return most
}

// runningWhilePending is how many jobs ran, on average, from the first
// start to the last: while the queue still held some, room freed
// anywhere should have been taken at once.
func runningWhilePending(recs []api.Job) float64 {
	var first, last time.Time
	for _, j := range recs {
		if first.IsZero() || j.Started.Before(first) {
			first = j.Started
		}
		if j.Started.After(last) {
			last = j.Started
		}
	}
	span := last.Sub(first).Seconds()
	if span <= 0 {
		return 0
	}
	sum := 0.0
	for _, j := range recs {
		end := j.Ended
		if end.After(last) {
			end = last
		}
		if d := end.Sub(j.Started).Seconds(); d > 0 {
			sum += d
		}
	}
	return sum / span
}

// sweepTargets notes the rounds against issue 43's targets, as the other
// experiments note theirs (a check is what holds on any machine), and
// checks the jobs' accounting: the CPU they used is what they were
// asked to burn.
func sweepTargets(r *Result, size sweepSize) {
	x := size.maxCPU
	met := map[bool]string{true: "met", false: "not met"}
	if ratio := r.Get("roam / static", x, "mean slowdown"); ratio != nil {
		r.Notes = append(r.Notes, fmt.Sprintf("target roam's mean slowdown ≤ 2/3 of static placement's, in the same round: %s (ratio %.2f; rounds %s)",
			met[ratio.Mean <= sweepTarget], ratio.Mean, strings.Join(rounded(ratio.Values), ", ")))
	}
	if m := r.Get("roam", x, "makespan / ideal"); m != nil {
		r.Notes = append(r.Notes, fmt.Sprintf("target roam's makespan ≤ %.2f × the ideal: %s (mean %.2f; rounds %s)",
			sweepMakespanTarget, met[m.Mean <= sweepMakespanTarget], m.Mean, strings.Join(rounded(m.Values), ", ")))
	}
	if m := r.Get("static", x, "migrations"); m != nil {
		r.Check("static placement never moved a job", slices.Max(m.Values) == 0, "%s moves a round", strings.Join(rounded(m.Values), ", "))
	}
	if m := r.Get("static", x, "preemptions"); m != nil {
		r.Check("static placement never preempted a job", slices.Max(m.Values) == 0, "%s preempted a round", strings.Join(rounded(m.Values), ", "))
	}
	below := 0
	for _, s := range []string{"roam", "static"} {
		if m := r.Get(s, x, "makespan / ideal"); m != nil {
			for _, v := range m.Values {
				if v < 0.95 {
					below++
				}
			}
		}
	}
	r.Check("no makespan below 0.95 × the ideal", below == 0, "%d sides below", below)
	for _, s := range []string{"roam", "static"} {
		if m := r.Get(s, x, "CPU used / asked"); m != nil {
			lo, hi := slices.Min(m.Values), slices.Max(m.Values)
			r.Check(s+": the jobs' accounted CPU is 0.95 to 1.10 times what they were asked to burn", lo >= 0.95 && hi <= 1.1, "used / asked %.3f to %.3f", lo, hi)
		}
	}
}

// moves says where the side's jobs moved: how many moves, by source and
// destination, how many failed, and when, from the submission; "" with
// none.
func (o sweepOutcome) moves() string {
	pairs := map[string]int{}
	var keys []string
	failed, n := 0, 0
	first, last, frozen := math.Inf(1), 0.0, 0.0
	for _, j := range o.recs {
		for _, m := range j.MigrationLog {
			n++
			if !m.OK {
				failed++
			}
			frozen += m.FreezeMS / 1000
			k := m.From + "→" + m.To
			if pairs[k] == 0 {
				keys = append(keys, k)
			}
			pairs[k]++
			at := m.At.Sub(o.t0).Seconds()
			first, last = math.Min(first, at), math.Max(last, at)
		}
	}
	if n == 0 {
		return ""
	}
	slices.Sort(keys)
	by := make([]string, len(keys))
	for i, k := range keys {
		by[i] = fmt.Sprintf("%s %d", k, pairs[k])
	}
	return fmt.Sprintf("%d moves (%d failed): %s; the first %.0f s, the last %.0f s after the submission; %.1f s frozen in all", n, failed, strings.Join(by, ", "), first, last, frozen)
}

// preemptions says how many of the side's jobs its home's queue
// preempted (its second level: a checkpoint kept, a restart from it), the
// checkpoints' bytes and freeze, and the restarts that failed; "" with
// none.
func (o sweepOutcome) preemptions() string {
	n, restored, failed, bytes, frozen := 0, 0, 0, int64(0), 0.0
	for _, j := range o.recs {
		if len(j.Restarts) == 0 {
			continue
		}
		n++
		for _, c := range j.Checkpoints {
			if c.OK && c.StoredOn != "" {
				bytes += c.Bytes
				frozen += c.FreezeMS / 1000
			}
		}
		for _, rs := range j.Restarts {
			if strings.Contains(rs.Why, "(failed") {
				failed++
			} else {
				restored++
			}
		}
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("%d jobs preempted and restarted from their checkpoints (%d restarts, %d failed): %.0f MiB of checkpoints, %.1f s frozen in all",
		n, restored, failed, float64(bytes)/(1<<20), frozen)
}
