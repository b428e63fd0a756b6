package agent

// The in-process harness: N whole agents in one test process, each with
// its real store (bbolt), its real memberlist, its real HTTP routes and
// drivers, on the in-memory network (harness_net_test.go) and fake nodes
// (harness_node_test.go), on testing/synctest's fake clock. No root, no
// real sleep: fake time moves only when every goroutine of the test waits.

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"math/rand"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"roam/internal/agent/config"
	"roam/internal/agent/launch"
	"roam/internal/agent/peer"
	"roam/internal/agent/spool"
	"roam/internal/api"
	"roam/internal/cpufeat"
	"roam/internal/sched"
	"roam/internal/secret"
)

var (
	harnessSeed       = flag.Int64("harness.seed", 0, "seed of TestAgentsMigrateUnderFaults (0: from the clock)")
	harnessMigrations = flag.Int("harness.migrations", 10000, "migrations TestAgentsMigrateUnderFaults asks for")
	harnessLog        = flag.Bool("harness.log", false, "show the agents' logs of a test that fails")
)

// hnode is one node of a harness cluster.
type hnode struct {
	name, host string
	cfg        Config
	a          *Agent
	fn         *fakeNode
	up         bool
	// free, when not 0, is what the node's state disk has free, as its
	// agent is told (Parts.DiskFree); 0: the real disk's. looks counts
	// the agent's asks.
	free, looks atomic.Int64
}

// cluster is a harness cluster.
type cluster struct {
	t     *testing.T
	net   *memnet
	world *world
	key   []byte
	nodes []*hnode
	log   *slog.Logger
	// logs are the agents' log lines (Info and above; all with
	// -harness.log), which explain quotes for a job that did not settle.
	logs *syncBuf
	mu   sync.Mutex // guards the nodes' a, fn and up
	// hosts are what each node says of its CPU, kernel and CRIU
	// (Parts.Host), by node; none: nothing, as an older roam.
	hosts  map[string]cpufeat.Host
	keepOn func(id, running, home string, live []string) string     // Parts.KeepOn
	routes func(*http.ServeMux, func(*http.Request) (uint32, bool)) // Parts.Routes
	// slurm answers every node's questions of Slurm (askSlurm, in
	// slurm_test.go); nil: a test without Slurm.
	slurm launch.SlurmAsk
}

// newCluster starts n agents named n1..nN with scheduler policy pol,
// joined into one cluster; each of opts may change every node's config.
func newCluster(t *testing.T, n int, seed int64, f faults, pol string, opts ...func(*Config)) *cluster {
	return newClusterOf(t, n, seed, f, pol, parts{}, opts...)
}

// parts are what a harness gives its agents' Parts besides the fakes:
// hosts, what each node says of itself (by node: its CPU, kernel and
// CRIU); keepOn, where periodic checkpoints are kept (nil: keeper's).
type parts struct {
	hosts  map[string]cpufeat.Host
	keepOn func(id, running, home string, live []string) string
	routes func(*http.ServeMux, func(*http.Request) (uint32, bool)) // Parts.Routes
}

// newClusterOf is newCluster whose agents get x in their Parts.
func newClusterOf(t *testing.T, n int, seed int64, f faults, pol string, x parts, opts ...func(*Config)) *cluster {
	c := &cluster{t: t, net: newMemnet(seed, f), world: newWorld(seed + 1), key: secret.New().GossipKey(), hosts: x.hosts, keepOn: x.keepOn, routes: x.routes}
	c.logs = &syncBuf{}
	c.log = slog.New(slog.NewTextHandler(c.logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if *harnessLog {
		buf := c.logs
		c.log = slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		t.Cleanup(func() {
			if t.Failed() {
				buf.mu.Lock()
				os.Stderr.Write(buf.b.Bytes())
				buf.mu.Unlock()
			}
		})
	}
	sf := filepath.Join(t.TempDir(), "secret")
	if err := secret.New().WriteFile(sf); err != nil {
		t.Fatal(err)
	}
	var join []string
	for i := 1; i <= n; i++ {
		join = append(join, fmt.Sprintf("198.18.40.%d:7946", i))
	}
	base := stateBase(t)
	for i := 1; i <= n; i++ {
		cfg := config.Default()
		cfg.NodeID = fmt.Sprintf("n%d", i)
		cfg.BindAddr = fmt.Sprintf("198.18.40.%d", i)
		cfg.GossipPort, cfg.PeerPort = 7946, 7947
		cfg.SecretFile = sf
		cfg.StateDir = filepath.Join(base, fmt.Sprintf("n%d", i))
		cfg.Socket = filepath.Join(cfg.StateDir, "unused.sock")
		cfg.Capacity = 1
		cfg.Join = join
		cfg.Scheduler = pol
		for _, o := range opts {
			o(&cfg)
		}
		c.nodes = append(c.nodes, &hnode{name: cfg.NodeID, host: cfg.BindAddr, cfg: cfg})
	}
	for i := range c.nodes {
		c.start(i)
	}
	t.Cleanup(c.stop)
	c.waitFor("every node sees every other", 5*time.Minute, func() bool {
		for _, h := range c.nodes {
			if h.a.gossip.Memberlist().NumMembers() != n {
				return false
			}
		}
		return true
	})
	return c
}

// stateBase is where the agents keep their state: in memory (/dev/shm)
// when the machine has it, as bbolt's fsyncs on a disk would make most of
// the harness's time.
func stateBase(t *testing.T) string {
	dir, err := os.MkdirTemp("/dev/shm", "roam-harness-")
	if err != nil {
		return t.TempDir()
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// start starts node i's agent (again, after a crash: same state dir).
func (c *cluster) start(i int) {
	h := c.nodes[i]
	fn := &fakeNode{w: c.world, name: h.name, spool: filepath.Join(h.cfg.StateDir, "spool")}
	api := &memListener{addr: h.host + ":0", accept: make(chan net.Conn), done: make(chan struct{})}
	c.net.mu.Lock()
	c.net.names[h.host] = h.name
	c.net.mu.Unlock()
	p := Parts{API: api, Transport: c.net.transport(h.host), Gossip: c.net.gossipTransport(h.host),
		GossipKey: c.key, Checkpointer: fn, Processes: fn, Prober: fn, Host: c.hosts[h.name], Slurm: c.askSlurm, KeepOn: c.keepOn, Routes: c.routes,
		DiskFree: func(dir string) int64 {
			h.looks.Add(1)
			if v := h.free.Load(); v != 0 {
				return v
			}
			return spool.Free(dir)
		}}
	a, err := New(h.cfg, p, c.log)
	if err != nil {
		c.t.Fatal(err)
	}
	c.net.revive(h.host)
	if err := a.Start(); err != nil {
		c.t.Fatalf("start %s: %v", h.name, err)
	}
	c.mu.Lock()
	h.a, h.fn, h.up = a, fn, true
	c.mu.Unlock()
}

// crash stops node i's agent as a crash would: first its store (nothing
// it still runs is recorded), its hands (nothing it still runs can act)
// and its network, then its goroutines. Its jobs' processes and its
// store's file stay.
func (c *cluster) crash(i int) {
	h := c.nodes[i]
	c.mu.Lock()
	h.up = false
	a, fn := h.a, h.fn
	c.mu.Unlock()
	// One instant for what the agent records and what it does: a store
	// closed after its hands died let it record a thaw or a kill its dead
	// node never carried out (a resumed copy left frozen for good).
	a.store.Close()
	fn.crash()
	c.net.crash(h.host)
	a.Close()
}

// stop ends the test's cluster: agents, connections, processes.
func (c *cluster) stop() {
	for i, h := range c.nodes {
		if h.up {
			c.crash(i)
		}
	}
	c.world.mu.Lock()
	for _, r := range c.world.unread {
		r.Close()
	}
	c.world.mu.Unlock()
	c.net.mu.Lock()
	c.net.stopped = true
	var conns []*memConn
	for cn := range c.net.conns {
		conns = append(conns, cn)
	}
	c.net.mu.Unlock()
	for _, cn := range conns {
		cn.Close()
	}
	// memberlist's probes and the agents' timers that were waiting end
	// in fake time.
	time.Sleep(time.Minute)
	c.world.endAll()
	synctest.Wait()
}

// live returns the agents that run, in node order.
func (c *cluster) live() []*hnode {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*hnode
	for _, h := range c.nodes {
		if h.up {
			out = append(out, h)
		}
	}
	return out
}

// waitFor waits, in fake time, until cond holds.
func (c *cluster) waitFor(what string, d time.Duration, cond func() bool) {
	c.t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			c.t.Fatalf("%s: not within %v of fake time", what, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// run starts count jobs from node i (--on node on, or placed).
func (c *cluster) run(i, count int, on string) []string {
	c.t.Helper()
	resp, err := c.nodes[i].a.launch.Run(Caller{}, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: count, On: on})
	if err != nil {
		c.t.Fatalf("run: %v", err)
	}
	return resp.IDs
}

// runAs starts count jobs of who from node 1 on node on.
func (c *cluster) runAs(who Caller, count int, on string) []string {
	c.t.Helper()
	resp, err := c.nodes[0].a.launch.Run(who, api.RunRequest{Argv: []string{"/bin/true"}, Cwd: "/", Count: count, On: on})
	if err != nil {
		c.t.Fatalf("run as uid %d: %v", who.UID, err)
	}
	return resp.IDs
}

// runningOn counts, by node, the jobs of ids that run exactly once.
func (c *cluster) runningOn(ids []string) map[string]int {
	on := map[string]int{}
	for _, id := range ids {
		if r, _ := c.world.copies(id); len(r) == 1 {
			on[r[0]]++
		}
	}
	return on
}

// settled says whether every job runs exactly once, with no frozen copy,
// where its home's record says, and is a local job of that node alone.
func (c *cluster) settled(ids []string) (bool, string) {
	for _, id := range ids {
		run, frz := c.world.copies(id)
		if len(run) != 1 || len(frz) != 0 {
			return false, fmt.Sprintf("job %s: running on %v, frozen on %v", id, run, frz)
		}
		if c.world.outsideCPU(id) {
			return false, fmt.Sprintf("job %s runs outside its CPU group", id)
		}
		if node := c.homeRec(id).Node; node != run[0] {
			return false, fmt.Sprintf("job %s runs on %s, its home's record says %q", id, run[0], node)
		}
		for _, h := range c.nodes {
			_, here := h.a.jobs.LocalRec(id)
			busy := len(h.a.migr.Arrivals())
			if here != (h.name == run[0]) {
				return false, fmt.Sprintf("job %s runs on %s; node %s has it as a local job: %v", id, run[0], h.name, here)
			}
			if busy > 0 {
				return false, fmt.Sprintf("node %s has %d migrations coming in", h.name, busy)
			}
		}
	}
	return true, ""
}

// nodeIndex is the index of node nK, or of job nK.SEQ's home: K-1.
func nodeIndex(name string) int {
	var k int
	fmt.Sscanf(name, "n%d", &k)
	return k - 1
}

// TestAgentsMigrateUnderFaults runs thousands of migrations between four
// whole agents while their connections are refused, cut, delayed,
// stalled and replayed, their answers lost, hosts partitioned, dumps and
// restores failing and agents crashing and restarting. After every change
// of a copy the fake kernel checks that no job ever has two running copies
// or none; at the end every job runs exactly once, where its home says.
func TestAgentsMigrateUnderFaults(t *testing.T) {
	seed := *harnessSeed
	if seed == 0 {
		seed = time.Now().UnixNano() % 1e9
	}
	want := *harnessMigrations
	if testing.Short() {
		want = min(want, 500)
	}
	t.Logf("seed %d (-harness.seed=%d replays the fault plan; goroutine interleavings still vary)", seed, seed)
	synctest.Test(t, func(t *testing.T) {
		f := faults{refuse: 0.01, cut: 0.01, lostReply: 0.01, delay: 0.02, stall: 0.005, dup: 0.01,
			maxDelay: 3 * time.Second, stallMin: 6 * time.Second, stallMax: 40 * time.Second}
		c := newCluster(t, 4, seed, faults{}, "static")
		rng := rand.New(rand.NewSource(seed + 2))
		var ids []string
		for i := range c.nodes {
			ids = append(ids, c.run(i, 2, c.nodes[(i+1)%4].name)...)
		}
		c.net.mu.Lock()
		c.net.f = f
		c.net.mu.Unlock()
		c.world.mu.Lock()
		c.world.dumpFail, c.world.restoreFail = 0.02, 0.02
		c.world.mu.Unlock()

		var mu sync.Mutex
		asked, ok := 0, 0
		outcomes := map[string]int{}
		busy := map[string]bool{}
		start := time.Now()
		done := make(chan struct{})
		var wg sync.WaitGroup
		for w := range 6 {
			wg.Go(func() {
				r := rand.New(rand.NewSource(seed + 10 + int64(w)))
				for {
					mu.Lock()
					if asked >= want {
						mu.Unlock()
						return
					}
					asked++
					mu.Unlock()
					// Migrations spread over fake time, so faults that last
					// (a crash, a partition) meet a few, not all.
					time.Sleep(time.Duration(r.Intn(1000)) * time.Millisecond)
					live := c.live()
					if len(live) == 0 {
						time.Sleep(time.Second)
						continue
					}
					entry := live[r.Intn(len(live))]
					// One migration a job at a time: a second one is
					// refused ("already migrating"), which tests little.
					id := ids[r.Intn(len(ids))]
					mu.Lock()
					for busy[id] {
						id = ids[r.Intn(len(ids))]
					}
					busy[id] = true
					mu.Unlock()
					to := c.nodes[r.Intn(len(c.nodes))].name
					if run, _ := c.world.copies(id); len(run) == 1 && run[0] == to {
						to = c.nodes[(nodeIndex(to)+1+r.Intn(len(c.nodes)-1))%len(c.nodes)].name
					}
					lazy := r.Intn(3) == 0
					m, err := entry.a.out.Migrate(Caller{}, api.MigrateRequest{ID: id, Node: to, Lazy: lazy})
					mu.Lock()
					delete(busy, id)
					if err == nil && m.OK {
						ok++
						outcomes["ok"]++
					} else {
						outcomes[errClass(err)]++
					}
					mu.Unlock()
				}
			})
		}
		// Chaos: crashes and restarts, partitions and heals.
		go func() {
			defer close(done)
			for {
				mu.Lock()
				finished := asked >= want
				mu.Unlock()
				if finished {
					return
				}
				time.Sleep(time.Duration(1+rng.Intn(20)) * time.Second)
				switch x := rng.Intn(10); {
				case x < 3:
					i := rng.Intn(len(c.nodes))
					if c.nodes[i].up && len(c.live()) > 2 {
						c.crash(i)
						c.world.mu.Lock()
						c.world.counts["agent-crash"]++
						c.world.mu.Unlock()
						time.Sleep(time.Duration(1+rng.Intn(30)) * time.Second)
						c.start(i)
					}
				case x < 5:
					a, b := rng.Intn(len(c.nodes)), rng.Intn(len(c.nodes))
					if a != b {
						c.net.partition(c.nodes[a].host, c.nodes[b].host)
						time.Sleep(time.Duration(5+rng.Intn(60)) * time.Second)
						c.net.heal()
					}
				}
			}
		}()
		wg.Wait()
		<-done
		c.net.heal()
		c.net.mu.Lock()
		c.net.f = faults{}
		c.net.mu.Unlock()
		c.world.mu.Lock()
		c.world.dumpFail, c.world.restoreFail = 0, 0
		c.world.mu.Unlock()
		for i, h := range c.nodes {
			if !h.up {
				c.start(i)
			}
		}
		var why string
		end := time.Now().Add(30 * time.Minute)
		for {
			c.world.mu.Lock()
			broken := c.world.broken
			c.world.mu.Unlock()
			if len(broken) > 0 {
				t.Fatalf("seed %d: the invariant broke %d times; first: %s", seed, len(broken), strings.Join(broken[:min(5, len(broken))], "; "))
			}
			var settled bool
			if settled, why = c.settled(ids); settled {
				break
			}
			if time.Now().After(end) {
				for _, id := range c.unsettled(ids) {
					c.explain(id)
				}
				t.Fatalf("seed %d: not settled after 30 minutes of fake time: %s", seed, why)
			}
			time.Sleep(100 * time.Millisecond)
		}
		c.world.mu.Lock()
		broken := append([]string(nil), c.world.broken...)
		counts := fmt.Sprint(sortedCounts(c.world.counts))
		c.world.mu.Unlock()
		c.net.mu.Lock()
		netCounts := fmt.Sprint(sortedCounts(c.net.counts))
		c.net.mu.Unlock()
		t.Logf("fake time: %v", time.Since(start).Round(time.Second))
		t.Logf("seed %d: %d migrations asked, %d committed; outcomes %v", seed, asked, ok, sortedCounts(outcomes))
		t.Logf("kernel: %s", counts)
		t.Logf("network: %s", netCounts)
		if len(broken) > 0 {
			t.Fatalf("seed %d: the invariant broke %d times; first: %s", seed, len(broken), strings.Join(broken[:min(5, len(broken))], "; "))
		}
		if ok < want/10 {
			t.Fatalf("seed %d: only %d of %d migrations committed: the faults leave too little to test", seed, ok, want)
		}
	})
}

// noTurns is a policy file: balance, with turns off (turn_every 0).
func noTurns(t *testing.T) string {
	t.Helper()
	text := strings.Replace(sched.Builtin["balance"], "params: {threshold: 0.25}", "params: {threshold: 0.25, turn_every: 0s}", 1)
	if text == sched.Builtin["balance"] {
		t.Fatal("the balance policy's text changed: noTurns cannot turn its turns off")
	}
	p := filepath.Join(t.TempDir(), "no-turns.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// isTurn says whether e is the migration of a turn (sched.ProblemTurn),
// by its reason.
func isTurn(e api.Event) bool {
	return e.Kind == "migrate" && strings.Contains(e.Why, "goes; the most a runnable job left here has had")
}

// errClass is a short name for a migration's failure, for the counts.
func errClass(err error) string {
	if err == nil {
		return "failed"
	}
	for _, k := range []error{peer.ErrNotFound, peer.ErrBadRequest, peer.ErrUnavailable, peer.ErrPinned, peer.ErrPermission} {
		if errors.Is(err, k) {
			return k.Error()
		}
	}
	return "other"
}

func sortedCounts(m map[string]int) []string {
	var out []string
	for k, v := range m {
		out = append(out, fmt.Sprintf("%s=%d", k, v))
	}
	sort.Strings(out)
	return out
}

// Two busy nodes see the same idle node and, in the same round, both
// decide to send it a job: the idle node admits the first move and
// declines the second (sched.Ledger.Admit counts the admitted move in),
// so it ends up with one job, not two. (Later the jobs take turns,
// sched.ProblemTurn: a turn is not a move to an idle node, and leaves
// the nodes running 2, 1 and 1 jobs in some order.)
func TestAgentsDoNotHerd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 7, faults{}, "balance")
		start := time.Now()
		jobs := append(c.run(0, 2, "n1"), c.run(1, 2, "n2")...)
		c.waitFor("a job moved to the idle node", 2*time.Minute, func() bool { return c.runningOn(jobs)["n3"] > 0 })
		time.Sleep(time.Minute) // more rounds: none may herd either
		var moved, declined []api.Event
		for _, h := range c.nodes {
			for _, e := range h.a.events.Since(start) {
				switch {
				case e.To == "n3" && e.Kind == "migrate" && !isTurn(e):
					moved = append(moved, e)
				case e.To == "n3" && e.Kind == "declined":
					declined = append(declined, e)
				}
			}
		}
		on := c.runningOn(jobs)
		t.Logf("moves to n3: %d, declined by n3: %d, jobs on %v", len(moved), len(declined), on)
		if len(on) != 3 || len(moved) != 1 {
			t.Fatalf("jobs on %v after %d moves to n3 (%+v), want one move and no node idle", on, len(moved), moved)
		}
		if len(declined) == 0 || declined[0].From == moved[0].From || declined[0].At.Sub(moved[0].At).Abs() > time.Second {
			t.Fatalf("declined %+v: want the other source's move of the same round declined (moved %+v)", declined, moved)
		}
	})
}

// A destination's admission of a move reserves room for the job: it ends
// when the job arrives, or, for a job that never comes, at its deadline
// (sched.AdmitHold), and not before.
func TestAgentsReservationEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 8, faults{}, "static")
		a1, a2 := c.nodes[0].a, c.nodes[1].a
		j1 := c.run(0, 1, "n1")[0]
		j2 := c.run(1, 1, "n2")[0]
		move := func(id, from string) sched.Move {
			return sched.Move{Job: id, From: from, To: "n3", Kind: sched.ProblemCPU, Runnable: 1, RSSMB: 10, SrcLoad: 2, Threshold: 0.25}
		}
		admit := func(from *Agent, mv sched.Move) string {
			t.Helper()
			var ar peer.AdmitAnswer
			if err := from.peers.Call("n3", "POST", "/v1/peer/migrate/admit", mv, &ar); err != nil {
				t.Fatal(err)
			}
			return ar.Refused
		}
		if r := admit(a1, move(j1, "n1")); r != "" {
			t.Fatalf("first move refused: %s", r)
		}
		if r := admit(a2, move(j2, "n2")); r == "" {
			t.Fatal("second move admitted while the first is reserved")
		}
		// The first job arrives, and ends there: its reservation ends
		// with its arrival, long before the deadline.
		if m, err := a1.out.Migrate(Caller{}, api.MigrateRequest{ID: j1, Node: "n3"}); err != nil || !m.OK {
			t.Fatalf("migrate %s: %+v %v", j1, m, err)
		}
		if _, err := c.nodes[0].a.control.Kill(Caller{}, api.KillRequest{IDs: []string{j1}, Signal: 9}); err != nil {
			t.Fatal(err)
		}
		c.waitFor("n3 idle", time.Minute, func() bool { return c.nodes[2].fn.Runnable(nil) == 0 })
		if r := admit(a2, move(j2, "n2")); r != "" {
			t.Fatalf("after the first job arrived, the second move is refused: %s", r)
		}
		// j2 never comes: its reservation holds until AdmitHold, then ends.
		j3 := c.run(0, 1, "n1")[0]
		time.Sleep(sched.AdmitHold - time.Second)
		if r := admit(a1, move(j3, "n1")); r == "" {
			t.Fatalf("admitted %v after the reservation of a job that never came, before its deadline", sched.AdmitHold-time.Second)
		}
		time.Sleep(time.Second + time.Millisecond)
		if r := admit(a1, move(j3, "n1")); r != "" {
			t.Fatalf("refused just after the reservation's deadline: %s", r)
		}
	})
}

// A move its source gives up after the destination admitted it (here the
// job ended between the answer and the migration) ends its admission at
// once (DELETE /v1/peer/migrate/admit), not at sched.AdmitHold: the
// destination takes another source's job within a second, where it
// refused it for 15 s before.
func TestAgentsWithdrawAnAbandonedMove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 9, faults{}, "static")
		a1, a2, a3 := c.nodes[0].a, c.nodes[1].a, c.nodes[2].a
		j1 := c.run(0, 1, "n1")[0]
		j2 := c.run(1, 1, "n2")[0]
		move := func(id, from string) sched.Move {
			return sched.Move{Job: id, From: from, To: "n3", At: time.Now(), Kind: sched.ProblemCPU, Runnable: 1, RSSMB: 10, SrcLoad: 2, Threshold: 0.25}
		}
		if _, err := a1.control.Kill(Caller{}, api.KillRequest{IDs: []string{j1}, Signal: 9}); err != nil {
			t.Fatal(err)
		}
		c.waitFor("n1 idle", time.Minute, func() bool { return c.nodes[0].fn.Runnable(nil) == 0 })
		pending := func() int {
			return a3.rounds.Pending(time.Now())
		}
		if a1.sched.Move(move(j1, "n1")) {
			t.Fatalf("moved %s, which had ended", j1)
		}
		c.waitFor("n3's place for the abandoned move ended", time.Second, func() bool { return pending() == 0 })
		var ar peer.AdmitAnswer
		if err := a2.peers.Call("n3", "POST", "/v1/peer/migrate/admit", move(j2, "n2"), &ar); err != nil || ar.Refused != "" {
			t.Fatalf("after the withdrawal, n2's move refused: %v %q", err, ar.Refused)
		}
		// A withdrawal names its decision: n1's for a job n3 never
		// admitted from it ends nothing, and n2's admission stays.
		var wr peer.WithdrawAnswer
		if err := a1.peers.Call("n3", "DELETE", "/v1/peer/migrate/admit", move(j2, "n1"), &wr); err != nil || wr.Ended || pending() != 1 {
			t.Fatalf("another node's withdrawal: %+v %v, %d pending (want 1)", wr, err, pending())
		}
		if err := a1.peers.Call("n3", "DELETE", "/v1/peer/migrate/admit", sched.Move{Job: j2, To: "n2"}, &wr); !errors.Is(err, peer.ErrBadRequest) {
			t.Fatalf("a withdrawal of a move to another node: %v, want a bad request", err)
		}
	})
}

type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// A burst typed on one node spreads as soon as its jobs are old enough
// to move (balance's min_age), not a period later: the round that saw
// them too young wakes the next one then (sched.Scheduler.Wake).
func TestAgentsSpreadABurstOnceItComesOfAge(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 9, faults{}, "balance")
		time.Sleep(3 * time.Second) // every node's load vector has the others
		start := time.Now()
		jobs := c.run(0, 3, "n1")
		c.waitFor("one job on each node", time.Minute, func() bool { return len(c.runningOn(jobs)) == 3 })
		// min_age 250 ms, then the moves; the next period would be a
		// second after the round that found them too young.
		if d := time.Since(start); d > 700*time.Millisecond {
			t.Fatalf("the burst spread after %v, want within 700ms (min_age 250ms)", d)
		}
	})
}

// A node that goes idle is told of at once, and a busier node sends it a
// job then, not after the load vector and the next period catch up:
// 2, 2 and 1 jobs on three nodes are as balanced as can be (they take
// turns: the job alone, once far enough ahead, shares a node with one of
// the others, whose node-mate is then alone); once the job alone ends,
// one of the others moves to its node.
func TestAgentsSpreadAgainWhenANodeGoesIdle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 10, faults{}, "balance")
		all := append(c.run(2, 1, "n3"), append(c.run(0, 2, "n1"), c.run(1, 2, "n2")...)...)
		time.Sleep(15 * time.Second) // loads settle; nothing gains by moving
		on := c.runningOn(all)
		var idle, lone string
		for n, k := range on {
			if k == 1 {
				idle = n
			}
		}
		var jobs []string
		for _, id := range all {
			if r, _ := c.world.copies(id); len(r) == 1 && r[0] == idle {
				lone = id
			} else {
				jobs = append(jobs, id)
			}
		}
		if len(on) != 3 || idle == "" || lone == "" {
			t.Fatalf("before the end, jobs are on %v: want 2, 2 and 1", on)
		}
		where := func() map[string]int { return c.runningOn(jobs) }
		home := map[string]int{"n1": 0, "n2": 1, "n3": 2}[strings.SplitN(lone, ".", 2)[0]]
		if _, err := c.nodes[home].a.control.Kill(Caller{}, api.KillRequest{IDs: []string{lone}, Signal: 9}); err != nil {
			t.Fatal(err)
		}
		end := time.Now()
		c.waitFor("a job on the idle node", time.Minute, func() bool { return where()[idle] > 0 })
		t.Logf("a job moved to the idle node %v after it went idle", time.Since(end))
		// Once its home has the job's end (a push, up to 100 ms), n3
		// probes at once (gossip.Gossip.Kick) and tells the busier nodes, which
		// judge at once. Waiting for the next probe took 200 ms here (up
		// to a quarter interval more); without the news, n3's smoothed
		// load reaches them a second or two later.
		if d := time.Since(end); d > 150*time.Millisecond {
			for _, h := range c.nodes {
				for _, e := range h.a.events.Since(end.Add(-20 * time.Second)) {
					t.Logf("%v %s %s->%s %s", e.At.Sub(end), e.Kind, e.From, e.To, e.Why)
				}
			}
			t.Fatalf("a job moved to the idle node %v after it went idle, want within 150ms", d)
		}
		time.Sleep(15 * time.Second)
		if on := where(); len(on) != 3 {
			t.Fatalf("after the end, jobs are on %v: want 2, 1 and 1", on)
		}
	})
}

// Two busy nodes that see the same idle nodes pick the same one: it takes
// the first job and refuses the second (its admission counts the first).
// The refused node sends its job to the other idle node at once, the
// refusal's answer having corrected its view, not at its next period: a
// node would otherwise stay idle for a second while a job waits.
func TestAgentsRetryARefusedMoveElsewhere(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 4, 12, faults{}, "balance")
		time.Sleep(3 * time.Second) // every node's load vector has the others
		start := time.Now()
		jobs := append(c.run(0, 2, "n1"), c.run(1, 2, "n2")...)
		c.waitFor("one job on each node", time.Minute, func() bool {
			on := c.runningOn(jobs)
			return on["n1"] == 1 && on["n2"] == 1 && on["n3"] == 1 && on["n4"] == 1
		})
		var refused int
		for _, h := range c.nodes {
			for _, e := range h.a.events.Since(start) {
				refused += btoi(e.Kind == "declined")
			}
		}
		if refused == 0 {
			t.Fatal("no move was refused: the two nodes did not pick the same idle node, and this test shows nothing")
		}
		// min_age 250 ms, a refused move, and the moves; the refused node's
		// next period would be a second after its round.
		if d := time.Since(start); d > 700*time.Millisecond {
			t.Fatalf("both idle nodes ran a job %v after the start, want within 700ms", d)
		}
	})
}

// An active policy (no jobs probe) runs its rounds at its period however
// often the scheduler is kicked: a kick runs no round for it, and must
// not put the period off. A peer's load that eases, a job that starts or
// ends, each kicks; a stream of them once kept such a node from ever
// running a round. threshold (period 1 s, min_age 2 s) moves one of the
// two jobs of the busy node while it is kicked ten times a second.
func TestActivePolicyRoundsDespiteKicks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 13, faults{}, "threshold")
		time.Sleep(3 * time.Second) // every node's load vector has the others
		start := time.Now()
		jobs := c.run(0, 2, "n1")
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			for {
				select {
				case <-stop:
					return
				case <-time.After(100 * time.Millisecond):
					c.nodes[0].a.rounds.Kick()
				}
			}
		}()
		c.waitFor("a job on n2", 10*time.Second, func() bool { return c.runningOn(jobs)["n2"] == 1 })
		// min_age 2 s, then a period's round: within 3 s and the move.
		if d := time.Since(start); d > 3500*time.Millisecond {
			t.Fatalf("a job moved %v after the start, want within 3.5s (min_age 2s, period 1s)", d)
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// A job that stops running for a moment (asleep, or stopped) is not a job
// gone: its node's dip in load is no news (load.Disseminator.News counts
// jobs), and no job moves to it. Its smoothed load hides a quarter
// second's dip from the balance threshold. (balance without turns: with
// them, the jobs of 2, 2 and 1 take turns whatever the dip.)
func TestAgentsDoNotMoveForADip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 3, 11, faults{}, noTurns(t))
		lone := c.run(2, 1, "n3")[0]
		c.run(0, 2, "n1")
		c.run(1, 2, "n2")
		time.Sleep(15 * time.Second)
		h := c.nodes[2]
		rec, _ := h.a.jobs.LocalRec(lone)
		pid := rec.PID
		start := time.Now()
		time.Sleep(5 * time.Millisecond)
		if err := h.fn.Signal(pid, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		time.Sleep(240 * time.Millisecond)
		if err := h.fn.Signal(pid, syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Second)
		for _, h := range c.nodes {
			for _, e := range h.a.events.Since(start) {
				if e.Kind == "migrate" {
					t.Errorf("job %s moved from %s to %s after a dip of 240ms on n3: %s", e.Job, e.From, e.To, e.Why)
				}
			}
		}
	})
}

// Jobs take turns: three equal jobs on two nodes of one CPU leave one
// job alone, which gains half a CPU-second a second on the two that
// share. Once it leads them by what it gains in sched.DefaultTurnEvery, the node
// running two sends its most advanced job to the lone job's node (a turn:
// its node-mate, further behind, runs alone). Over two minutes every job
// has had its third of the two CPUs, to within a few leads; without turns
// the lone job would have had 120 CPU-seconds and the others 60. A turn
// carries the job's CPU time with it (migrate.Header.CPUBefore).
func TestAgentsTakeTurns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newCluster(t, 2, 11, faults{}, "balance")
		ids := append(c.run(0, 2, "n1"), c.run(1, 1, "n2")...)
		start := time.Now()
		time.Sleep(2 * time.Minute)
		elapsed := time.Since(start).Seconds()
		// Each job's CPU time is what its copies had, on every node.
		c.world.mu.Lock()
		c.world.account()
		had := map[string]float64{}
		for _, p := range c.world.procs {
			had[p.job] += p.cpu
		}
		c.world.mu.Unlock()
		lead := sched.DefaultTurnEvery.Seconds() * (1 - 0.5)
		for _, id := range ids {
			if h := had[id]; h < 2*elapsed/3-3*lead || h > 2*elapsed/3+3*lead {
				t.Errorf("job %s had %.1f CPU-s in %.0f s, want %.1f ± %.1f (a third of two CPUs, within three leads)", id, h, elapsed, 2*elapsed/3, 3*lead)
			}
		}
		// The node's own view carries the CPU time across the moves: each
		// job's attained service is what it had.
		for i := range c.nodes {
			snap := c.nodes[i].a.sched.Snapshot()
			for _, j := range snap.Jobs {
				if d := j.Attained - had[j.ID]; d < -2 || d > 2 {
					t.Errorf("node n%d counts job %s at %.1f CPU-s, it had %.1f", i+1, j.ID, j.Attained, had[j.ID])
				}
			}
		}
		turns := 0
		for i := range c.nodes {
			for _, e := range c.nodes[i].a.events.Since(time.Time{}) {
				if isTurn(e) && e.Node == e.From { // once, as its source logged it
					turns++
				}
			}
		}
		// A turn waits for a lead built at half a CPU-second a second, and
		// a job that moved does not turn again within turn_every: at most
		// one turn a turn_every between the two nodes.
		if most := int(elapsed / sched.DefaultTurnEvery.Seconds()); turns < 3 || turns > most {
			t.Fatalf("%d turns in two minutes, want 3 to %d", turns, most)
		}
		t.Logf("%d turns; CPU-s had: %v", turns, had)
		// Never two running copies, never none (the world's invariant).
		c.world.mu.Lock()
		broken := c.world.broken
		c.world.mu.Unlock()
		if len(broken) > 0 {
			t.Fatalf("the invariant broke: %s", broken[0])
		}
	})
}
