package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"roam/internal/api"
	"roam/internal/bench"
)

var workloadOnce sync.Map

// workload builds workloads/NAME.c into the test's bin directory, once.
func workload(t *testing.T, name string) string {
	t.Helper()
	p := filepath.Join(binDir, name)
	once, _ := workloadOnce.LoadOrStore(name, &sync.Once{})
	var out []byte
	var err error
	once.(*sync.Once).Do(func() {
		lib := map[string]string{"dkg": "-lcrypto", "migjob": "-pthread", "kinds": "-pthread"}[name]
		if lib == "" {
			lib = "-lm"
		}
		out, err = exec.Command("gcc", "-O2", "-o", p, "../../workloads/"+name+".c", lib).CombinedOutput()
	})
	if err != nil {
		t.Fatalf("build %s: %v\n%s", name, err, out)
	}
	return p
}

func balanceSpec(t *testing.T, name string, subnet int) bench.BalanceSpec {
	return bench.BalanceSpec{
		Name: name, Subnet: fmt.Sprintf("198.18.%d.0/24", subnet), Roamd: filepath.Join(binDir, "roamd"),
		Burn: workload(t, "burn"), BgLoad: workload(t, "bgload"),
		CPU: []float64{0.8, 0.4, 0.4, 0.2}, Jobs: 12, Work: 8, On: "4", BgMaxSec: 5,
	}
}

// 12 jobs of 8 CPU-seconds typed on the slowest of 4 nodes (0.8, 0.4, 0.4,
// 0.2 CPUs): under balance the makespan is close to the ideal. Then, in
// the same run, 12 jobs of 2 CPU-seconds: a burst spread in one round.
func TestBalanceSpreadsByCapacity(t *testing.T) {
	spec := balanceSpec(t, "e2ebal", 23)
	spec.Policies, spec.ShortWork = []string{"balance"}, 2
	ps, err := bench.Balance(spec, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	short := ps[1]
	if !short.AllOK || short.WorkS != 2 {
		t.Fatalf("short jobs: %+v", short)
	}
	// The jobs measure their own CPU time: at least what they were asked.
	if short.CPUUsedS < 12*2 || short.IdealS < short.NominalIdealS {
		t.Fatalf("short jobs used %.2f CPU-s in all (ideal %.1f s, nominal %.1f s): less than asked", short.CPUUsedS, short.IdealS, short.NominalIdealS)
	}
	// The burst spread: no node ran more than its share in the end, and
	// jobs moved off the slowest node. How fast (one round, as soon as
	// the jobs are old enough to move) and the makespan against the ideal
	// are `roam bench balance`'s to measure (docs/benchmarks.md): on two
	// cores other tests share, a time bound here failed with nothing
	// broken.
	if short.BalancedS < 0 || short.Migrations < 6 {
		t.Log(strings.Join(short.Timeline, "\n"))
		t.Fatalf("short jobs: balanced after %.1f s (-1: never), %d migrations; want balanced, 6 moves or more", short.BalancedS, short.Migrations)
	}
	t.Logf("short jobs: makespan %.1f s, ideal %.1f s, ratio %.2f, balanced after %.1f s, %d migrations", short.MakespanS, short.IdealS, short.Ratio, short.BalancedS, short.Migrations)
	p := ps[0]
	if !p.AllOK {
		t.Fatalf("not every job ended with status 0: %+v", p)
	}
	// Without balancing the twelve would run on the 0.2-CPU node at 9
	// times the ideal; with it, runs here give 1.12 to 1.15 on an idle
	// machine and up to about 2 with the machine's cores taken by others.
	if p.Migrations < 6 || p.BalancedS < 0 || p.Ratio > 3 {
		t.Log(strings.Join(p.Timeline, "\n"))
		t.Fatalf("%d migrations, balanced after %.1f s, makespan %.1f s = %.2f x the ideal %.1f s: the jobs did not spread", p.Migrations, p.BalancedS, p.MakespanS, p.Ratio, p.IdealS)
	}
	t.Logf("makespan %.1f s, ideal %.1f s, ratio %.2f, %d migrations", p.MakespanS, p.IdealS, p.Ratio, p.Migrations)
}

// The same with seed 002's background load on node 2: balance beats static
// by at least 20 % in makespan, in the same run.
func TestBalanceBeatsStaticUnderBackgroundLoad(t *testing.T) {
	long(t)
	spec := balanceSpec(t, "e2ebg", 24)
	spec.Policies, spec.Background = []string{"balance", "static"}, true
	ps, err := bench.Balance(spec, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	bal, st := ps[0], ps[1]
	if !bal.AllOK || !st.AllOK {
		t.Fatalf("not every job ended with status 0: %+v %+v", bal, st)
	}
	if st.Migrations != 0 {
		t.Fatalf("static migrated %d times", st.Migrations)
	}
	if bal.MakespanS > 0.8*st.MakespanS {
		t.Fatalf("balance %.1f s vs static %.1f s: not 20 %% better", bal.MakespanS, st.MakespanS)
	}
	t.Logf("balance %.1f s, static %.1f s (%.0f %% better), ideal %.1f s", bal.MakespanS, st.MakespanS, 100*(1-bal.MakespanS/st.MakespanS), bal.IdealS)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

func (c *cluster) events(node string) []api.Event {
	c.t.Helper()
	out := c.mustRun("--node", node, "events", "--json")
	var evs []api.Event
	dec := json.NewDecoder(strings.NewReader(out))
	for dec.More() {
		var e api.Event
		if err := dec.Decode(&e); err != nil {
			c.t.Fatalf("events --json: %v: %s", err, out)
		}
		evs = append(evs, e)
	}
	return evs
}

// perNode counts the running jobs of ids on each node.
func perNode(js []api.Job, ids map[string]bool) map[string]int {
	out := map[string]int{}
	for _, j := range js {
		if ids[j.ID] && j.State == "running" {
			out[j.Node]++
		}
	}
	return out
}

func (c *cluster) runJobs(node string, n int, argv ...string) map[string]bool {
	c.t.Helper()
	out := c.mustRun(append([]string{"--node", node, "run", "-d", "-n", fmt.Sprint(n), "--on", node}, argv...)...)
	ids := map[string]bool{}
	for _, id := range strings.Fields(out) {
		ids[id] = true
	}
	if len(ids) != n {
		c.t.Fatalf("run -d -n %d printed %q", n, out)
	}
	return ids
}

// killOnCleanup kills the jobs ids (from node 1) when the test ends.
func (c *cluster) killOnCleanup(ids map[string]bool) {
	c.t.Cleanup(func() {
		var list []string
		for id := range ids {
			list = append(list, id)
		}
		c.run(append([]string{"--node", "1", "kill", "-s", "KILL"}, list...)...)
	})
}

// A process whose memory grows on a node with little memory moves away
// before the node runs out, and nothing is OOM-killed.
func TestMemoryUshering(t *testing.T) {
	c := upCluster(t, "e2eush", 25, "--nodes", "3", "--cpu", "0.5,0.5,0.5", "--mem-mb", "320,4096,4096", "--scheduler", "ushering")
	c.waitAllAlive(3)
	// 12 MiB more every half second, to 360 MiB: more than node 1 has.
	prog := "a=[]\nimport time\nfor i in range(30):\n    a.append(b'x'*(12<<20)); time.sleep(0.5)\nprint('grew', sum(len(x) for x in a)>>20, 'MiB')\n"
	id := c.start("1", "python3", "-c", prog)
	j := c.waitFinished(id, 90*time.Second)
	if j.ExitCode == nil || *j.ExitCode != 0 {
		t.Fatalf("job ended %v on %s: %+v", j.ExitCode, j.Node, j)
	}
	out := c.mustRun("--node", "1", "logs", id)
	if strings.TrimSpace(out) != "grew 360 MiB" {
		t.Fatalf("output %q", out)
	}
	if j.Migrations < 1 || j.MigrationLog[0].From != "1" || !strings.Contains(j.MigrationLog[0].Why, "ushering") {
		t.Fatalf("no ushering migration off node 1: %+v", j.MigrationLog)
	}
	oom, _ := os.ReadFile("/sys/fs/cgroup/memory/roam/e2eush/n1/memory.oom_control")
	if strings.Contains(string(oom), "oom_kill ") && !strings.Contains(string(oom), "oom_kill 0") {
		t.Fatalf("node 1's cgroup OOM-killed: %s", oom)
	}
	t.Logf("moved %s -> %s: %s", j.MigrationLog[0].From, j.MigrationLog[0].To, j.MigrationLog[0].Why)
}

// Switching from static to balance while 12 jobs run on one node: the load
// spreads within 10 s; no job restarts or loses output.
func TestPolicyLoadWhileJobsRun(t *testing.T) {
	burn := workload(t, "burn")
	c := upCluster(t, "e2epol", 26, "--nodes", "4", "--cpu", "0.45", "--scheduler", "static")
	c.waitAllAlive(4)
	ids := c.runJobs("1", 12, burn, "4", "8")
	time.Sleep(3 * time.Second) // static: nothing may move meanwhile
	if got := perNode(c.ps("1"), ids); got["1"] != 12 {
		t.Fatalf("under static the jobs moved: %v", got)
	}
	loaded := time.Now()
	out := c.mustRun("--node", "2", "policy", "load", "balance")
	if !strings.Contains(out, "policy balance loaded on nodes 1, 2, 3, 4") {
		t.Fatalf("policy load said %q", out)
	}
	show := c.mustRun("--node", "3", "policy", "show")
	if !strings.Contains(show, "# nodes 1, 2, 3, 4\nname: balance") {
		t.Fatalf("policy show: %s", show)
	}
	waitFor(t, 10*time.Second, "jobs on every node", func() (bool, string) {
		got := perNode(c.ps("1"), ids)
		return len(got) == 4, fmt.Sprint(got)
	})
	t.Logf("spread %.1f s after the load", time.Since(loaded).Seconds())
	for id := range ids {
		j := c.waitFinished(id, 120*time.Second)
		if j.ExitCode == nil || *j.ExitCode != 0 {
			t.Fatalf("%s ended %v", id, j.ExitCode)
		}
		got := c.mustRun("--node", "1", "logs", id)
		lines := strings.Split(strings.TrimSpace(got), "\n")
		// One pass through the work: 8 progress lines in order, then done.
		if len(lines) != 9 || lines[0] != "burn: 1/9" || lines[7] != "burn: 8/9" || !strings.HasPrefix(lines[8], "burn: done") {
			t.Fatalf("%s output (restarted or lost?):\n%s", id, got)
		}
	}

	// The loaded policy is the cluster's: a node that joins later, and
	// one whose agent restarts, run it too, though their config files
	// still say static.
	c.mustRun("cluster", "add", "--cpu", "0.1")
	n3 := c.status().Nodes[2]
	if err := syscall.Kill(n3.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "node 3's agent gone", func() (bool, string) {
		return syscall.Kill(n3.PID, 0) != nil, "still there"
	})
	c.mustRun("cluster", "start", "3")
	waitFor(t, 20*time.Second, "every node runs balance", func() (bool, string) {
		out, _ := c.run("--node", "5", "policy", "show")
		return strings.Contains(out, "# nodes 1, 2, 3, 4, 5\nname: balance"), out
	})
}

// 8 equal jobs on 4 equal nodes: they balance, and over 60 s no job moves
// twice.
func TestNoPingPong(t *testing.T) {
	burn := workload(t, "burn")
	c := upCluster(t, "e2epp", 27, "--nodes", "4", "--cpu", "0.4", "--scheduler", "balance")
	c.waitAllAlive(4)
	// Node 1 decides from its load vector: until a member's load has
	// reached it, it cannot send that member anything, and it overfills
	// the others (then one of their jobs moves a second time). The vector
	// fills by gossip within a few seconds of the start; this test is
	// about what happens once it has.
	waitFor(t, 15*time.Second, "node 1 knows every node's load", func() (bool, string) {
		ns := c.nodes("1")
		known := 0
		for _, n := range ns {
			if n.Alive && (n.Self || n.Load != nil) {
				known++
			}
		}
		return known == 4, fmt.Sprintf("%d of 4 known", known)
	})
	ids := c.runJobs("1", 8, burn, "600", "0")
	c.killOnCleanup(ids)
	waitFor(t, 20*time.Second, "2 jobs per node", func() (bool, string) {
		got := perNode(c.ps("1"), ids)
		return len(got) == 4 && got["1"] == 2 && got["2"] == 2 && got["3"] == 2 && got["4"] == 2, fmt.Sprint(got)
	})
	end := time.Now().Add(60 * time.Second)
	for time.Now().Before(end) {
		for _, j := range c.ps("1") {
			if ids[j.ID] && j.Migrations >= 2 {
				for _, e := range c.events("1") {
					if e.Kind != "place" {
						t.Logf("%s %s %s %s->%s %s", e.At.Format("15:04:05.000"), e.Kind, e.Job, e.From, e.To, e.Why)
					}
				}
				t.Fatalf("job %s migrated %d times: %+v", j.ID, j.Migrations, j.MigrationLog)
			}
		}
		time.Sleep(2 * time.Second)
	}
	got := perNode(c.ps("1"), ids)
	if len(got) != 4 || got["1"] != 2 {
		t.Fatalf("after 60 s: %v", got)
	}
	moves := 0
	for _, e := range c.events("1") {
		if e.Kind == "migrate" {
			moves++
		}
	}
	if moves != 6 {
		t.Fatalf("%d migrations in the events, want 6 (each extra job once)", moves)
	}
}

// Jobs take turns on real agents and real CRIU: three CPU-bound jobs on
// two nodes of 0.5 CPU leave one alone, which gains a quarter CPU-second
// a second on the two that share. Once it leads them by what it gains in
// sched.DefaultTurnEvery (1.5 CPU-seconds), the node running two sends its most
// advanced job over (a turn). Each job's CPU time goes with it: the
// scheduler judges the next turn by it, and roam ps shows it (a restored
// process's own count starts again at zero). After a minute every job has
// had its third of the CPU, within a few leads; without turns the lone
// job would have had twice what each of the others had.
func TestJobsTakeTurns(t *testing.T) {
	burn := workload(t, "burn")
	c := upCluster(t, "e2eturn", 45, "--nodes", "2", "--cpu", "0.5", "--scheduler", "balance")
	c.waitAllAlive(2)
	waitFor(t, 15*time.Second, "node 1 knows node 2's load", func() (bool, string) {
		for _, n := range c.nodes("1") {
			if n.ID == "2" && n.Alive && n.Load != nil {
				return true, ""
			}
		}
		return false, "not yet"
	})
	ids := c.runJobs("1", 3, burn, "600", "0")
	c.killOnCleanup(ids)
	waitFor(t, 20*time.Second, "2 jobs on one node, 1 on the other", func() (bool, string) {
		got := perNode(c.ps("1"), ids)
		return len(got) == 2, fmt.Sprint(got)
	})
	start := time.Now()
	// A turn's reason names the job and its CPU time then.
	turn := regexp.MustCompile(`job ([0-9.]+), ([0-9.]+) CPU-seconds, goes; the most a runnable job left here has had`)
	type turned struct {
		job string
		cpu float64
	}
	var turns []turned
	kinds := map[string]int{}
	waitFor(t, 90*time.Second, "two turns", func() (bool, string) {
		turns = nil
		clear(kinds)
		for _, e := range c.events("1") { // every node's
			if !ids[e.Job] || e.Kind == "place" {
				continue
			}
			kinds[e.Kind]++
			if m := turn.FindStringSubmatch(e.Why); e.Kind == "migrate" && m != nil {
				cpu, _ := strconv.ParseFloat(m[2], 64)
				turns = append(turns, turned{m[1], cpu})
			}
		}
		return len(turns) >= 2, fmt.Sprint(turns)
	})
	t.Logf("events of the jobs but their placement: %v", kinds)
	if d := time.Since(start); d < time.Minute {
		time.Sleep(time.Minute - d)
	}
	js := c.ps("1")
	cpu := map[string]float64{}
	for _, j := range js {
		if ids[j.ID] {
			if j.State != "running" {
				t.Fatalf("job %s is %s", j.ID, j.State)
			}
			cpu[j.ID] = j.CPUSeconds
		}
	}
	// What a job had when it turned, it has still, and more.
	for _, tr := range turns {
		if cpu[tr.job] < tr.cpu {
			t.Errorf("job %s turned with %.2f CPU-seconds; roam ps shows %.2f since", tr.job, tr.cpu, cpu[tr.job])
		}
	}
	lo, hi := math.Inf(1), 0.0
	for _, v := range cpu {
		lo, hi = min(lo, v), max(hi, v)
	}
	t.Logf("%d turns (%v); CPU-seconds after %v: %v", len(turns), turns, time.Since(start).Round(time.Second), cpu)
	if len(cpu) != 3 || hi > 1.5*lo {
		t.Fatalf("CPU-seconds %v: the most is over 1.5 times the least (without turns it is twice)", cpu)
	}
}

// roam top shows every node and quits on q (through tmux).
func TestTopThroughTmux(t *testing.T) {
	c := upCluster(t, "e2etop", 28, "--nodes", "3", "--cpu", "0.3")
	c.waitAllAlive(3)
	sess := "roam-e2etop"
	_ = exec.Command("tmux", "kill-session", "-t", sess).Run()
	t.Cleanup(func() { _ = exec.Command("tmux", "kill-session", "-t", sess).Run() })
	cmd := fmt.Sprintf("ROAM_CLUSTER=%s %s --node 1 top", c.name, filepath.Join(binDir, "roam"))
	if out, err := exec.Command("tmux", "new-session", "-d", "-s", sess, "-x", "160", "-y", "40", cmd).CombinedOutput(); err != nil {
		t.Fatalf("tmux: %v %s", err, out)
	}
	waitFor(t, 15*time.Second, "top shows 3 alive nodes", func() (bool, string) {
		out, _ := exec.Command("tmux", "capture-pane", "-p", "-t", sess).Output()
		n := 0
		for _, l := range strings.Split(string(out), "\n") {
			f := strings.Fields(l)
			if len(f) > 2 && (f[0] == "1" || f[0] == "2" || f[0] == "3") && f[1] == "alive" {
				n++
			}
		}
		return n == 3 && strings.Contains(string(out), "roam top"), string(out)
	})
	if err := exec.Command("tmux", "send-keys", "-t", sess, "q").Run(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "top quits on q", func() (bool, string) {
		return exec.Command("tmux", "has-session", "-t", sess).Run() != nil, "session still there"
	})
}
