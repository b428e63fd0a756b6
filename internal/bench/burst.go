package bench

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"roam/internal/api"
	"roam/internal/emu"
	"roam/internal/sched"
)

// ---- burst ----

// burstCPU is make demo's cluster (scripts/demo.sh); the burst is typed on
// its last, slowest node.
var burstCPU = []float64{0.8, 0.4, 0.4, 0.2}

const (
	burstJobs = 12
	burstWork = 2.0 // CPU-seconds a job
)

var expBurst = &Experiment{
	Name:  "burst",
	Title: "A burst typed on the slowest node under the default policy, timed around the attached roam run",
	Seed:  "issue 43 (the default policy is slow to react); seed 003 §4.3 (process age in migration decisions)",
	About: "Brings up make demo's cluster (0.8, 0.4, 0.4 and 0.2 CPUs) and types `roam --node 4 run -n 12 --on 4 burn 2` there, attached, as a user would: twelve jobs of 2 CPU-seconds on the 0.2-CPU node. It times the command from its start until it returns, against the ideal: the CPU time the jobs measured themselves (burn's last line, which the command prints) over the 1.8 CPUs. In interleaved rounds, one cluster, it runs the default policy (mosix: min_age 2 s, but crowd_min_age 250 ms on a crowded node) and the same policy with min_age alone (no crowd, the default before), each loaded with roam policy load before its run. It also reports, from the first start, when the first move began and when no node ran more jobs than its share.",
	run: func(x *Run) error {
		r := x.Res
		r.XLabel = "CPU-s a job"
		r.Setup = fmt.Sprintf("4 nodes of %v CPU; %d jobs of %g CPU-seconds (workloads/burn) typed with --on on the 0.2-CPU node, attached, by root.", burstCPU, burstJobs, burstWork)
		roam := x.tool("roam")
		if _, err := os.Stat(roam); err != nil {
			return fmt.Errorf("%s is missing (make build makes it)", roam)
		}
		alone := strings.Replace(sched.Builtin[sched.DefaultPolicy], " crowd: 5, crowd_min_age: 250ms,", "", 1)
		alone = strings.Replace(alone, "name: mosix", "name: mosix-min-age-alone", 1)
		if alone == sched.Builtin[sched.DefaultPolicy] || !strings.Contains(alone, "mosix-min-age-alone") {
			return fmt.Errorf("the default policy's text changed: the burst experiment cannot take its crowd out")
		}
		policies := []struct{ series, text string }{
			{"default (mosix)", sched.Builtin[sched.DefaultPolicy]},
			{"min_age alone", alone},
		}
		x.plan(len(policies) * x.Reps)
		// The slowest run of each series, told job by job: where its
		// time went.
		slowest := map[string]burstOutcome{}
		spec := emu.Spec{Name: "bburst", Nodes: len(burstCPU), CPU: burstCPU, Subnet: "198.18.77.0/24"}
		return withCluster(x, spec, func(st emu.State, cl *api.Client) error {
			slow := api.NewClient(st.Nodes[len(st.Nodes)-1].Socket)
			for rep := 1; rep <= x.Reps; rep++ {
				for i := range policies {
					// Each round the other first: what the machine does
					// meanwhile weighs on both alike.
					p := policies[(i+rep)%len(policies)]
					x.step("%s, repetition %d", p.series, rep)
					if err := loadPolicy(cl, p.text); err != nil {
						return err
					}
					x.waitIdle(slow)
					b, err := burstRun(roam, x.tool("burn"), st, slow)
					if err != nil {
						return fmt.Errorf("%s, repetition %d: %w", p.series, rep, err)
					}
					r.Add(p.series, burstWork, "time / ideal", "×", b.took/b.ideal)
					r.Add(p.series, burstWork, "time", "s", b.took)
					r.Add(p.series, burstWork, "ideal", "s", b.ideal)
					r.Add(p.series, burstWork, "first move", "s", b.firstMove)
					r.Add(p.series, burstWork, "balanced", "s", b.balanced)
					r.Add(p.series, burstWork, "migrations", "", float64(b.moves))
					r.Add(p.series, burstWork, "other CPU", "CPUs", b.otherCPU)
					if s, ok := slowest[p.series]; !ok || b.took > s.took {
						slowest[p.series] = b
					}
				}
			}
			// The target is a note: on a machine shared with other
			// work the time grows, and a check is what the tests require.
			met := map[bool]string{true: "met", false: "not met"}
			below := 0
			for _, p := range policies {
				m := r.Get(p.series, burstWork, "time / ideal")
				if m == nil {
					continue
				}
				for _, v := range m.Values {
					if v < 0.95 {
						below++
					}
				}
				r.Notes = append(r.Notes, fmt.Sprintf("target ≤ 1.3 × the ideal (issue 43), %s: %s (mean %.2f; runs %s)",
					p.series, met[m.Mean <= 1.3], m.Mean, strings.Join(rounded(m.Values), ", ")))
			}
			r.Check("no run faster than 0.95 × the ideal", below == 0, "%d runs below", below)
			for _, p := range policies {
				if b, ok := slowest[p.series]; ok {
					r.Notes = append(r.Notes, fmt.Sprintf("the slowest run of %s, %.1f s (seconds from the first start):\n\n    %s",
						p.series, b.took, strings.Join(b.timeline, "\n    ")))
				}
			}
			return nil
		})
	},
}

func rounded(vs []float64) []string {
	out := make([]string, len(vs))
	for i, v := range vs {
		out[i] = strconv.FormatFloat(v, 'f', 2, 64)
	}
	return out
}

// loadPolicy loads a policy on every node, as roam policy load does, and
// waits until every live node runs it.
func loadPolicy(cl *api.Client, text string) error {
	if err := cl.Do(context.Background(), http.MethodPost, api.PathPolicy, api.PolicyRequest{Text: text}, nil); err != nil {
		return fmt.Errorf("policy load: %w", err)
	}
	want, err := sched.ParsePolicy([]byte(text))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var ps []api.NodePolicy
		if err := cl.Get(api.PathPolicy, &ps); err == nil {
			ok := len(ps) > 0
			for _, p := range ps {
				ok = ok && p.Text == want.Text()
			}
			if ok {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("policy %s not on every node after 20 s", want.Policy.Name)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// burstOutcome is one burst: seconds, from the command's start (took) or
// from the first job's start (firstMove, balanced: -1 if never).
type burstOutcome struct {
	took, ideal, firstMove, balanced float64
	moves                            int
	// otherCPU is how many CPUs the machine was busy with, on average
	// during the command, beyond the jobs' own work: roam's agents,
	// CRIU and the command itself, whatever else runs on the machine,
	// and what the VM's host took (steal). Well over the agents' few
	// tenths says something else took CPU from the cluster meanwhile.
	otherCPU float64
	timeline []string
}

var burstDone = regexp.MustCompile(`(?m)^\[([^\]]+)\] burn: done cpu=([0-9.]+)`)

// burstRun types the burst on the slowest node of st and times it.
func burstRun(roam, burn string, st emu.State, slow *api.Client) (burstOutcome, error) {
	var b burstOutcome
	node := st.Nodes[len(st.Nodes)-1].ID
	cmd := exec.Command(roam, "--node", node, "run", "-n", strconv.Itoa(burstJobs), "--on", node, burn, fmt.Sprint(burstWork), "0")
	cmd.Env = append(os.Environ(), "ROAM_CLUSTER="+st.Name)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	busy0 := busyCPU()
	began := time.Now()
	err := cmd.Run()
	b.took = time.Since(began).Seconds()
	busy := busyCPU() - busy0
	if err != nil {
		return b, fmt.Errorf("roam run: %v: %s", err, tail(out.String()))
	}
	var ids []string
	used := 0.0
	for _, m := range burstDone.FindAllStringSubmatch(out.String(), -1) {
		ids = append(ids, m[1])
		v, _ := strconv.ParseFloat(m[2], 64)
		used += v
	}
	if len(ids) != burstJobs {
		return b, fmt.Errorf("%d of %d jobs printed burn's last line: %s", len(ids), burstJobs, tail(out.String()))
	}
	b.ideal = used / capacitySum(capsOf(st))
	b.otherCPU = (busy - used) / b.took
	js, err := waitJobs(slow, ids, time.Minute)
	if err != nil {
		return b, err
	}
	t0, _ := runSpan(js)
	b.firstMove, b.balanced = -1, -1
	for _, j := range js {
		b.moves += j.Migrations
		for _, m := range j.MigrationLog {
			if at := m.At.Sub(t0).Seconds(); b.firstMove < 0 || at < b.firstMove {
				b.firstMove = at
			}
		}
	}
	if at, ok := BalancedAt(js, capsOf(st)); ok {
		b.balanced = at.Sub(t0).Seconds()
	}
	want := map[string]bool{}
	for _, id := range ids {
		want[id] = true
	}
	b.timeline = timeline(slow, js, want, t0)
	return b, nil
}

// busyCPU is the CPU-seconds the machine's CPUs have been busy since boot,
// or taken by the VM's host (/proc/stat: all but idle and iowait, guest
// time already in user, in the kernel's USER_HZ of 100).
func busyCPU() float64 {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	sum := 0.0
	for i, v := range f[1:] {
		if n, err := strconv.ParseFloat(v, 64); err == nil && i != 3 && i != 4 && i < 8 {
			sum += n
		}
	}
	return sum / 100
}

// capsOf is st's nodes' capacities by id.
func capsOf(st emu.State) map[string]float64 {
	caps := map[string]float64{}
	for _, n := range st.Nodes {
		caps[n.ID] = n.Capacity
	}
	return caps
}
