package agent

// Fuzz targets for everything the agent decodes from outside its process:
// its config file, what memberlist hands it (a member's metadata, load
// messages, the gossiped policy state), and every request body and query
// of the peer port. The peer routes run through the agent's own mux on an
// agent built by New with in-memory parts (no root, no CRIU, no network,
// no goroutine of its own): a job table on disk (one per target in each
// fuzzing process, in its temporary directory) and a temporary state
// directory per input.
// scripts/fuzz.sh runs them.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"roam/internal/agent/config"
	"roam/internal/agent/httpx"
	"roam/internal/agent/jobtable"
	"roam/internal/agent/members"
	"roam/internal/agent/news"
	"roam/internal/agent/peer"
	"roam/internal/agent/rounds"
	"roam/internal/agent/scheduler"
	"roam/internal/agent/spool"
	"roam/internal/agent/stats"
	"roam/internal/job"
	"roam/internal/load"
	"roam/internal/migrate"
	"roam/internal/sched"
)

// ---- the agent under test ----

// fzSelf is the agent's node id; fzHome its home job, fzLost a lost one,
// fzOver a finished one; fzLocal and fzPinned jobs of n1 running here.
const (
	fzSelf   = "n2"
	fzHome   = "n2.1"
	fzLost   = "n2.2"
	fzOver   = "n2.3"
	fzLocal  = "n1.5"
	fzPinned = "n1.6"
	fzPID    = 4242
	fzTix    = 77
	fzMID    = "00000000000000aa"
	// fzLeast is the least CPU time of the node's jobs (scheduler.Scheduler.Least):
	// a turn whose job is behind them by enough is taken.
	fzLeast = 2.0
)

// fzStarted is when the seeded jobs started.
var fzStarted = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fzNodeID is a node id (Config.Validate).
var fzNodeID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.-]{0,62}$`)

// fzThread is the one thread that runs on the fuzz node, no job's: its
// load is the same whatever jobs the table holds.
const fzThread = 4000

// newFzNode is the node behind the fuzz harness's agent, its spool in
// spool: a fake node on a world of its own. Nothing starts there, no page
// server runs, every dump and restore fails and every job is pinned, so
// that an input that gets that far is refused there, with the job running
// on. Its clock stands still, so that its jobs' CPU time stays what
// fzSeedNode gave them, and one thread runs there (fzThread).
func newFzNode(spool string) *fakeNode {
	w := newWorld(1)
	w.now = func() time.Time { return fzStarted }
	w.startFail, w.pagesFail, w.dumpFail, w.restoreFail = 1, 1, 1, 1
	return &fakeNode{w: w, name: fzSelf, spool: spool, pin: "fuzz node: no job moves", threads: map[int]uint64{fzThread: 1}}
}

// fzSeedNode forgets what n was asked and puts its world back as the
// fuzz harness's inputs start from: fzLocal runs as root and fzOwn as A
// (uid 1000), each with one second of CPU time; fzPinned's record names a
// pid no process has.
func fzSeedNode(n *fakeNode) {
	n.mu.Lock()
	n.started, n.signals, n.kills, n.restores, n.sinks, n.onRestore = nil, nil, nil, nil, 0, nil
	n.mu.Unlock()
	w := n.w
	w.mu.Lock()
	defer w.mu.Unlock()
	w.procs = map[int]*fproc{}
	for _, p := range []*fproc{
		{pid: fzPID, tix: fzTix, job: fzLocal, spool: n.SpoolDir(fzLocal)},
		{pid: fzOwnPID, tix: fzTix, job: fzOwn, spool: n.SpoolDir(fzOwn), uid: 1000},
	} {
		p.node, p.state, p.exit, p.cpu = n.name, running, make(chan struct{}), 1
		w.procs[p.pid] = p
	}
	w.ended, w.counts, w.broken = map[string]bool{}, map[string]int{}, nil
}

// fzListener and fzTransport are parts New wants and these tests never use.
type fzListener struct{}

func (fzListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (fzListener) Close() error              { return nil }
func (fzListener) Addr() net.Addr            { return &net.UnixAddr{Name: "fuzz", Net: "unix"} }

type fzTransport struct{}

func (fzTransport) Listen(func(net.Listener) net.Listener) (net.Listener, error) {
	return fzListener{}, nil
}

// Sender is the node the fuzzed migration headers name as their source.
func (fzTransport) Sender(*http.Request) string { return "n1" }

func (fzTransport) Dial(context.Context, string) (net.Conn, error) {
	return nil, errors.New("fuzz: no network")
}

// fzNoNet is the peers' HTTP transport: nobody answers.
type fzNoNet struct{}

func (fzNoNet) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("fuzz: no network")
}

// fzBare is an agent as New makes it, with no job table, and the
// scheduling's owners: enough for what memberlist calls.
func fzBare(tb testing.TB) (*Agent, *fakeNode) { return fzBareIn(tb, "/nonexistent/state") }

// fzBareIn is fzBare with its state in dir.
func fzBareIn(tb testing.TB, dir string) (*Agent, *fakeNode) {
	tb.Helper()
	cfg := config.Default()
	cfg.NodeID, cfg.BindAddr, cfg.Capacity, cfg.Scheduler = fzSelf, "127.0.0.1", 2, "static"
	cfg.SecretFile, cfg.StateDir, cfg.Socket = "/nonexistent/secret", dir, "/nonexistent/sock"
	node := newFzNode("/nonexistent/spool")
	a, err := New(cfg, Parts{API: fzListener{}, Transport: fzTransport{}, GossipKey: make([]byte, 32),
		Checkpointer: node, Processes: node, Prober: node}, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
	wireScheduling(a)
	return a, node
}

// fzBarePool keeps one fzBare agent per target and process, and puts
// back before each input what memberlist's callbacks can change: New for
// every input (a registry of metrics, the policy parsed) ran these
// targets at a few thousand inputs a second.
type fzBarePool struct {
	a   *Agent
	pol *sched.Scheduler
	lp  load.Policy
}

func (p *fzBarePool) get(tb testing.TB) *Agent {
	tb.Helper()
	if p.a == nil {
		p.a, _ = fzBare(tb)
		p.pol = p.a.rounds.Policy().Scheduler
		p.lp, _ = load.ParsePolicy(p.a.cfg.Load.Policy)
	}
	a := p.a
	a.members = members.ForNode(a.cfg.NodeID, a.cfg.Load, a.capacity, 0, p.pol.Policy, rankMembers)
	a.stats = stats.Counters{}
	a.rounds, a.events = rounds.New(p.pol, rankSched), &rounds.Events{}
	a.event = scheduler.Recorder(a.cfg.NodeID, a.log, a.events)
	wireScheduling(a) // its owners, of the new ones
	return a
}

// fzStore opens a job table of one fuzz target in one process at path
// (bbolt opens a file once per process, and every transaction costs an
// fsync): the peer routes' writes go there.
func fzStore(tb testing.TB, path string) *job.Store {
	tb.Helper()
	st, err := job.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	// The seeded home jobs (reset) are n2.1 to n2.3: a new id comes after.
	if err := st.BumpSeq(3); err != nil {
		st.Close()
		tb.Fatal(err)
	}
	return st
}

// fzStoreMax is the size past which a pool's job table is replaced by an
// empty one: the records inputs leave there (a restart's, a migration's
// ledger) stay, and grew FuzzPeerRestart's table to 8 MB in 20 minutes.
const fzStoreMax = 1 << 20

// fzAgent is an agent whose peer routes run as Start wires them, with a
// state directory of its own and the jobs of the constants above: a home
// job running on n3 with some output, a lost one and a finished one, and
// two jobs of n1 running here (placed by hand, and pinned).
type fzAgent struct {
	*Agent
	node *fakeNode
	dir  string
	pol  *sched.Scheduler // the policy it started with
	// seeded stamps the state directory as reset left it (fingerprint).
	seeded []fzStamp
}

// fzPool keeps one fzAgent per fuzz target and process, and puts it back
// as it was before each input: a whole new agent with its directories for
// every input ran the peer routes at about a thousand inputs a second,
// a thousand times too slow for the millions a target needs. What a route
// can change is listed in reset; an input that leaves something running
// behind it (a migration's timer that has fired, a lazy dump) gets the
// next input a new agent; so does a pile of goroutines earlier inputs
// left (fzLeftMax).
type fzPool struct {
	st    *job.Store
	stDir string
	stN   int // job tables opened: st is stPath(stN)
	dir   string
	a     *fzAgent
	base  int // goroutines when the first agent was built
}

// fzLeftMax is how many goroutines earlier inputs may leave running before
// the pool builds a new agent and stops the old one. A migration out of
// this node tells the job's home how it went until the home has it
// (migrate.HomeRetry); the harness's homes are never reached, so each
// input that moved a job left one behind, on the pooled agent, waking
// every 2 s into later inputs' state: 611 of them after 980,000 inputs of
// FuzzPeerControl.
const fzLeftMax = 16

func newFzPool(f *testing.F) *fzPool {
	p := &fzPool{stDir: f.TempDir(), dir: f.TempDir()}
	p.newStore(f)
	f.Cleanup(func() {
		if p.a != nil {
			close(p.a.stop)
		}
		p.st.Close()
	})
	return p
}

// newStore gives the pool, and its agent, an empty job table in place of
// the one it had, which it closes and removes. A goroutine an input left
// that still uses the old one gets bbolt's "database not open".
func (p *fzPool) newStore(tb testing.TB) {
	tb.Helper()
	old, oldPath := p.st, p.stPath(p.stN)
	p.stN++
	p.st = fzStore(tb, p.stPath(p.stN))
	if p.a != nil {
		p.a.store = p.st
	}
	if old != nil {
		old.Close()
		os.Remove(oldPath)
	}
}

// stPath is the file of the pool's n-th job table.
func (p *fzPool) stPath(n int) string { return filepath.Join(p.stDir, fmt.Sprintf("state-%d.db", n)) }

// get returns the pool's agent as newFzAgent would make it.
func (p *fzPool) get(t *testing.T) *fzAgent {
	t.Helper()
	if p.a != nil && (!p.a.quiet() || runtime.NumGoroutine() > p.base+fzLeftMax) {
		close(p.a.stop)
		p.a = nil
	}
	if fi, err := os.Stat(p.stPath(p.stN)); err == nil && fi.Size() > fzStoreMax {
		p.newStore(t)
	}
	if p.a == nil {
		p.a = buildFzAgent(t, p.st, p.dir)
		if p.base == 0 { // the old agent's goroutines may not have ended yet
			p.base = runtime.NumGoroutine()
		}
	}
	p.a.reset(t)
	return p.a
}

// newFzAgent is a fresh fzAgent of its own, stopped when t ends.
func newFzAgent(t *testing.T, st *job.Store) *fzAgent {
	t.Helper()
	a := buildFzAgent(t, st, t.TempDir())
	a.reset(t)
	t.Cleanup(func() { close(a.stop) })
	return a
}

// buildFzAgent makes the agent and its peer routes, with its state in dir.
func buildFzAgent(t *testing.T, st *job.Store, dir string) *fzAgent {
	t.Helper()
	a, node := fzBareIn(t, dir) // New makes the checkpoint keeper of dir
	a.imageDir = filepath.Join(dir, "images")
	node.spool = filepath.Join(dir, "spool")
	mux := http.NewServeMux()
	a.peerMux = mux
	a.peers = &peer.Client{Addr: func(n string) (string, error) { return a.members.PeerAddr(n) }, HTTP: &http.Client{Transport: fzNoNet{}},
		Self: &http.Client{Transport: peer.Loopback{Routes: a.peerMux, Log: a.log}}, SelfAddr: "127.0.0.1:7947"}
	a.store = st
	// The owners the routes name, made again by reset in place: the
	// routes hold them.
	a.news = new(news.Relay)
	a.peerRoutes(mux)
	return &fzAgent{Agent: a, node: node, dir: dir, pol: a.rounds.Policy().Scheduler}
}

// fzStamp is what a stat says of one path of the seeded state directory.
type fzStamp struct {
	ino, size, nlink uint64
	mtime, ctime     syscall.Timespec
}

// fingerprint stamps every directory of the seeded state and its one
// file, or is nil where it cannot tell a change: on a tmpfs, a
// directory's size counts its entries, so an entry added or removed below
// one of them, or a byte written to the file, changes a stamp even within
// the clock tick that leaves the times alone. Elsewhere every input gets
// the directory made again.
func (a *fzAgent) fingerprint() []fzStamp {
	var fs syscall.Statfs_t
	if syscall.Statfs(a.dir, &fs) != nil || fs.Type != 0x01021994 { // TMPFS_MAGIC
		return nil
	}
	var out []fzStamp
	for _, p := range append(a.seededDirs(), filepath.Join(a.dir, "home"), a.seededOutput()) {
		var st syscall.Stat_t
		if syscall.Lstat(p, &st) != nil {
			return nil
		}
		out = append(out, fzStamp{st.Ino, uint64(st.Size), uint64(st.Nlink), st.Mtim, st.Ctim})
	}
	return out
}

// seededDirs are the directories reset makes; seededOutput is the home
// job's output it writes.
func (a *fzAgent) seededDirs() []string {
	return []string{a.imageDir, a.node.spool, a.spools.Dir(fzHome), a.spools.Dir(fzLost), a.spools.Dir(fzOver)}
}

func (a *fzAgent) seededOutput() string { return filepath.Join(a.spools.Dir(fzHome), "stdout") }

// quiet says the last input left nothing that runs on: it stops the
// timers of the migrations it started, and fails when one had fired.
func (a *fzAgent) quiet() bool {
	ok := a.migr.Serving() == 0
	for _, in := range a.migr.Arrivals() {
		if in.StopTimer() {
			ok = false
		}
	}
	return ok
}

// reset puts back the agent's state directory, the node's record of what
// it was asked, and everything in the agent a peer route can change.
func (a *fzAgent) reset(t *testing.T) {
	t.Helper()
	// New spools: what the last input's restart made of a job's
	// incarnation is forgotten.
	a.spools = spool.New(filepath.Join(a.cfg.StateDir, "home"), rankSpool)
	if a.seeded == nil || !slices.Equal(a.seeded, a.fingerprint()) {
		for _, d := range []string{"images", "spool", "home"} {
			if err := os.RemoveAll(filepath.Join(a.dir, d)); err != nil {
				t.Fatal(err)
			}
		}
		for _, d := range a.seededDirs() {
			if err := os.MkdirAll(d, 0o700); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(a.seededOutput(), []byte("hello\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		a.seeded = a.fingerprint()
	}
	n := a.node
	fzSeedNode(n)

	// The last input's goroutines end with its stop: the drivers keep the
	// stop they were made with, so a stop put in its place would never
	// reach them. An input that had the agent leave closed it already.
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
	a.stop = make(chan struct{})
	a.memberLeft = make(chan struct{}, 1)
	// Put in place, not emptied: an event of the last input may still be
	// logged into the old ones.
	a.rounds, a.events = rounds.New(a.pol, rankSched), &rounds.Events{}
	a.event = scheduler.Recorder(a.cfg.NodeID, a.log, a.events)
	a.members = members.ForNode(a.cfg.NodeID, a.cfg.Load, a.capacity, 0, a.pol.Policy, rankMembers)
	a.members.Join(members.Member{Addr: "127.0.0.1:7946", PeerAddr: a.peers.SelfAddr, Capacity: a.capacity}, 0, time.Time{})
	// The job table is emptied (and seeded below) in place, under its
	// lock: a goroutine the last input started may still hold it
	// (inbound's carryOut, pruneMigrations), and a table put in its place
	// would have it unlock a mutex it never locked.
	if a.jobs == nil {
		a.jobs = jobtable.New(a.store, a.spools, rankJobs)
	}
	a.jobs.Reset(a.store, a.spools)
	// The scheduling's owners, of the new rounds, members and stop: the
	// node does not drain, and its jobs' least CPU time is fzLeast.
	wireScheduling(a.Agent)
	a.sched.SetLeast(fzLeast)
	// What starts, signals and lists jobs, the checkpoints and the relay
	// hold the owners put in place above (the members and the store of
	// now). The relay is refilled in place: the routes hold it.
	a.wireJobs()
	a.checkpoints = newCheckpoints(a.Agent)
	a.files = newFiles(a.Agent)
	*a.news = *newNews(a.Agent)
	// The migration drivers hold the parts put in place above.
	wireMigration(a.Agent)
	a.migr.Clear()
	code := 0
	a.jobs.Seed([]job.Record{
		{ID: fzHome, UID: 1000, GID: 1000, User: "u", Argv: []string{"/bin/sleep", "1000"}, Cwd: "/", Home: fzSelf, Node: "n3",
			State: job.StateRunning, Started: fzStarted, Migrations: 2, Group: fzHome,
			MigrationLog: []job.Migration{{MID: fzMID, Seq: 2, From: "n2", To: "n3", OK: true}}},
		{ID: fzLost, UID: 1000, Home: fzSelf, Node: "n4", State: job.StateLost, Started: fzStarted, LostAt: fzStarted.Add(time.Hour), Group: fzLost},
		{ID: fzOver, UID: 0, Home: fzSelf, Node: "n3", State: job.StateFinished, ExitCode: &code, Started: fzStarted, Ended: fzStarted.Add(time.Minute), Group: fzOver},
	}, []job.Local{
		{ID: fzLocal, Home: "n1", HomeAddr: "10.0.0.1:7947", PID: fzPID, StartTix: fzTix, Dir: n.SpoolDir(fzLocal), Started: fzStarted, Hold: migrate.HoldManual},
		{ID: fzPinned, Home: "n1", HomeAddr: "10.0.0.1:7947", PID: fzPID + 1, StartTix: fzTix, Dir: n.SpoolDir(fzPinned), Started: fzStarted, Hold: migrate.HoldPin},
	})
}

// call runs one request through the peer routes.
func (a *fzAgent) call(method, target string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, "https://"+a.peers.SelfAddr+target, bytes.NewReader(body))
	w := httptest.NewRecorder()
	a.peerMux.ServeHTTP(w, req)
	return w
}

// fzDecode decodes a body as the routes do (httpjson.go's decode).
func fzDecode(body []byte, v any) bool {
	return json.NewDecoder(io.LimitReader(bytes.NewReader(body), httpx.MaxBody)).Decode(v) == nil
}

func fzJSON(tb testing.TB, v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// fzStatus fails on an answer that is neither a success nor a refusal of
// the input: a peer's bad input is a 4xx, never an internal error.
func fzStatus(t *testing.T, w *httptest.ResponseRecorder, what string) {
	t.Helper()
	if w.Code >= 500 {
		t.Fatalf("%s: status %d: %s", what, w.Code, w.Body)
	}
}

// fzSafeJobID says id is a job id whose spool and cgroup paths stay
// where they belong: HOME.SEQ, HOME a node id, one plain name.
func fzSafeJobID(id string) bool {
	i := strings.LastIndexByte(id, '.')
	return i > 0 && fzNodeID.MatchString(id[:i]) && id[i+1:] != "" && strings.Trim(id[i+1:], "0123456789") == "" &&
		filepath.Join("/spool", id) == "/spool/"+id
}
