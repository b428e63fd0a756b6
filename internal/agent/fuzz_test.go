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
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"

	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/ckpt"
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
	// fzLeast is the least CPU time of the node's jobs (Agent.selfLeast):
	// a turn whose job is behind them by enough is taken.
	fzLeast = 2.0
)

// fzStarted is when the seeded jobs started.
var fzStarted = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fzNodeID is a node id (Config.Validate).
var fzNodeID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.-]{0,62}$`)

// fzNode is the node behind the agent: it records what the agent asks
// of it and does nothing. A part method not defined here is nil: a fuzz
// input that reaches one panics, which says the target went further than
// it was built for.
type fzNode struct {
	job.Processes
	ckpt.Checkpointer
	spool string

	mu        sync.Mutex
	started   []job.Spec
	signals   []fzSignal
	kills     []int
	restores  []ckpt.RestoreSpec
	sinks     int
	onRestore func(ckpt.RestoreSpec)
}

type fzSignal struct {
	pid int
	sig syscall.Signal
}

var errFzNode = errors.New("fuzz node: refused")

func (n *fzNode) Start(s job.Spec) (*job.Proc, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.started = append(n.started, s)
	return nil, errFzNode
}
func (n *fzNode) SpoolDir(id string) string { return filepath.Join(n.spool, id) }
func (n *fzNode) Alive(pid int, tix uint64) bool {
	return (pid == fzPID || pid == fzOwnPID) && (tix == fzTix || tix == 0)
}
func (n *fzNode) StartTicks(pid int) uint64 {
	if pid == fzPID || pid == fzOwnPID {
		return fzTix
	}
	return 0
}
func (n *fzNode) Signal(pid int, sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.signals = append(n.signals, fzSignal{pid, sig})
	return nil
}
func (n *fzNode) Kill(pid int, tix uint64, wait time.Duration) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.kills = append(n.kills, pid)
}
func (n *fzNode) Settle(id string, pid int) error { return nil }
func (n *fzNode) Runnable(map[int]uint64) int     { return 1 }
func (n *fzNode) MemFreeMB() float64              { return 4096 }
func (n *fzNode) Sink(dir string) (ckpt.Sink, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.sinks++
	return nil, errFzNode
}
func (n *fzNode) StoppedCopies(id, spool string) []int { return nil }
func (n *fzNode) Restore(s ckpt.RestoreSpec) (int, ckpt.Times, error) {
	n.mu.Lock()
	n.restores = append(n.restores, s)
	f := n.onRestore
	n.mu.Unlock()
	if f != nil {
		f(s)
	}
	return 0, nil, errFzNode
}

// fzListener and fzTransport are parts New wants and these tests never use.
type fzListener struct{}

func (fzListener) Accept() (net.Conn, error) { return nil, net.ErrClosed }
func (fzListener) Close() error              { return nil }
func (fzListener) Addr() net.Addr            { return &net.UnixAddr{Name: "fuzz", Net: "unix"} }

type fzTransport struct{}

func (fzTransport) Listen() (net.Listener, error) { return fzListener{}, nil }
func (fzTransport) Dial(context.Context, string) (net.Conn, error) {
	return nil, errors.New("fuzz: no network")
}

// fzNoNet is the peers' HTTP transport: nobody answers.
type fzNoNet struct{}

func (fzNoNet) RoundTrip(*http.Request) (*http.Response, error) {
	return nil, errors.New("fuzz: no network")
}

// fzBare is an agent as New makes it, with no job table: enough for what
// memberlist calls.
func fzBare(tb testing.TB) (*Agent, *fzNode) {
	tb.Helper()
	cfg := DefaultConfig()
	cfg.NodeID, cfg.BindAddr, cfg.Capacity, cfg.Scheduler = fzSelf, "127.0.0.1", 2, "static"
	cfg.SecretFile, cfg.StateDir, cfg.Socket = "/nonexistent/secret", "/nonexistent/state", "/nonexistent/sock"
	node := &fzNode{spool: "/nonexistent/spool"}
	a, err := New(cfg, Parts{API: fzListener{}, Transport: fzTransport{}, GossipKey: make([]byte, 32),
		Checkpointer: node, Processes: node, Prober: node}, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatal(err)
	}
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
		p.pol = p.a.sch.pol
		p.lp, _ = load.ParsePolicy(p.a.cfg.Load.Policy)
	}
	a := p.a
	a.mu.Lock()
	a.known = map[string]*member{}
	a.dis = load.NewDisseminator(a.cfg.NodeID, a.cfg.Load.VectorSize, p.lp, a.cfg.Load.Interval)
	a.mu.Unlock()
	a.stats = counters{}
	a.sch.mu.Lock()
	a.sch.pol, a.sch.polVer, a.sch.polAt, a.sch.events = p.pol, 0, time.Time{}, nil
	a.sch.mu.Unlock()
	a.placement = p.pol.Policy.Placement
	select {
	case <-a.sch.kick:
	default:
	}
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
	node *fzNode
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
	a, node := fzBare(t)
	a.cfg.StateDir = dir
	a.imageDir = filepath.Join(dir, "images")
	node.spool = filepath.Join(dir, "spool")
	a.peerMux = a.newPeerMux()
	a.peers = &peer.Client{Addr: a.peerAddr, HTTP: &http.Client{Transport: fzNoNet{}},
		Self: &http.Client{Transport: peer.Loopback{Routes: a.peerMux, Log: a.log}}, SelfAddr: "127.0.0.1:7947"}
	a.store = st
	return &fzAgent{Agent: a, node: node, dir: dir, pol: a.sch.pol}
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
	return []string{a.imageDir, a.node.spool, a.homeSpool(fzHome), a.homeSpool(fzLost), a.homeSpool(fzOver)}
}

func (a *fzAgent) seededOutput() string { return filepath.Join(a.homeSpool(fzHome), "stdout") }

// quiet says the last input left nothing that runs on: it stops the
// timers of the migrations it started, and fails when one had fired.
func (a *fzAgent) quiet() bool {
	a.jobs.mu.Lock()
	defer a.jobs.mu.Unlock()
	ok := len(a.migr.lazy) == 0 && len(a.migr.sinks) == 0
	for _, in := range a.migr.in {
		if in.timer != nil && !in.timer.Stop() {
			ok = false
		}
	}
	return ok
}

// reset puts back the agent's state directory, the node's record of what
// it was asked, and everything in the agent a peer route can change.
func (a *fzAgent) reset(t *testing.T) {
	t.Helper()
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
	n.mu.Lock()
	n.started, n.signals, n.kills, n.restores, n.sinks, n.onRestore = nil, nil, nil, nil, 0, nil
	n.mu.Unlock()

	a.stop = make(chan struct{})
	a.draining.Store(false)
	a.memberLeft = make(chan struct{}, 1)
	a.sch.mu.Lock() // an event of the last input may still be logged
	a.sch.kick = make(chan struct{}, 1)
	a.sch.pol, a.sch.polVer, a.sch.polAt = a.pol, 0, time.Time{}
	a.sch.ledger, a.sch.prev, a.sch.events = sched.Ledger{}, nil, nil
	a.sch.mu.Unlock()
	a.placement = a.pol.Policy.Placement
	a.mu.Lock()
	a.rr, a.selfLoad, a.selfMem, a.lastProbe = 0, 0, 0, time.Time{}
	a.selfLeast.Store(math.Float64bits(fzLeast))
	a.known = map[string]*member{fzSelf: {addr: "127.0.0.1:7946", peerAddr: a.peers.SelfAddr, capacity: a.capacity, alive: true, since: time.Now()}}
	a.mu.Unlock()
	// The job table is emptied and seeded in place, under its lock: a
	// goroutine the last input started may still hold it (carryOutIn's
	// pruneMigrations), and a table put in its place would have it unlock
	// a mutex it never locked.
	if a.jobs == nil {
		a.jobs = &jobs{kick: make(chan struct{}, 1)}
		a.jobs.initLocks()
	}
	j := a.jobs
	j.mu.Lock()
	defer j.mu.Unlock()
	j.home, j.local, j.wake, j.heard = map[string]*job.Record{}, map[string]*localJob{}, map[string]chan struct{}{}, map[string]time.Time{}
	select {
	case <-j.kick:
	default:
	}
	j.restarting, j.uploading, j.restoring = nil, nil, nil
	j.incs.Clear()
	a.migr = migrationState{}
	code := 0
	for _, r := range []job.Record{
		{ID: fzHome, UID: 1000, GID: 1000, User: "u", Argv: []string{"/bin/sleep", "1000"}, Cwd: "/", Home: fzSelf, Node: "n3",
			State: job.StateRunning, Started: fzStarted, Migrations: 2, Group: fzHome,
			MigrationLog: []job.Migration{{MID: fzMID, Seq: 2, From: "n2", To: "n3", OK: true}}},
		{ID: fzLost, UID: 1000, Home: fzSelf, Node: "n4", State: job.StateLost, Started: fzStarted, LostAt: fzStarted.Add(time.Hour), Group: fzLost},
		{ID: fzOver, UID: 0, Home: fzSelf, Node: "n3", State: job.StateFinished, ExitCode: &code, Started: fzStarted, Ended: fzStarted.Add(time.Minute), Group: fzOver},
	} {
		a.jobs.home[r.ID] = &r
	}
	for _, l := range []job.Local{
		{ID: fzLocal, Home: "n1", HomeAddr: "10.0.0.1:7947", PID: fzPID, StartTix: fzTix, Dir: n.SpoolDir(fzLocal), Started: fzStarted, Hold: migrate.HoldManual},
		{ID: fzPinned, Home: "n1", HomeAddr: "10.0.0.1:7947", PID: fzPID + 1, StartTix: fzTix, Dir: n.SpoolDir(fzPinned), Started: fzStarted, Hold: migrate.HoldPin},
	} {
		a.jobs.local[l.ID] = &localJob{rec: l}
	}
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
	return json.NewDecoder(io.LimitReader(bytes.NewReader(body), maxBody)).Decode(v) == nil
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

// ---- config ----

// FuzzParseConfig: a config ParseConfig accepts keeps Validate's promises
// (every number finite and in range, paths absolute) and renders
// (Marshal, as `roam cluster up` writes it) to YAML that parses to the
// same config.
func FuzzParseConfig(f *testing.F) {
	c := DefaultConfig()
	c.NodeID, c.InitPath = "n1", "/usr/libexec/roam/roam-init"
	f.Add(c.Marshal())
	for _, s := range []string{
		"node_id: n1\n",
		"node_id: n1\nbind_addr: 10.0.0.1\nadvertise_addr: 10.0.0.1\njoin: [10.0.0.2, \"node3:7000\", \"[fd00::3]\"]\ncapacity: 0.5\nload:\n  policy: beneficial\n  interval: 500ms\n  vector_size: 16\n",
		"node_id: n1\njob_cgroup: none\nshared_dirs: [/home, /srv/data]\nscheduler: balance\nimage_dir: /dev/shm/roam\ncriu_path: /usr/sbin/criu\n",
		"node_id: n1\nlimits:\n  run_count: 5\n  keep_finished: 1h\n  requests_per_second: 2.5\n",
		"node_id: n1\ngossip_port: 7947\n",
		"node_id: '../x'\n",
		"node_id: n1\njob_cgroup: ../x\n",
		"node_id: n1\ncapacity: -1\n",
		"node_id: n1\nload:\n  interval: 1ms\n",
		"node_id: n1\ncapacty: 1\n",
		"node_id: n1\n---\nnode_id: n2\n",
		"",
		"node_id: &a n1\nsocket: *a\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseConfig(b)
		if err != nil {
			if !errors.Is(err, peer.ErrConfig) {
				t.Fatalf("error of another kind: %v", err)
			}
			return
		}
		fzFinite(t, "config", reflect.ValueOf(c))
		switch {
		case !fzNodeID.MatchString(c.NodeID):
			t.Fatalf("node_id %q", c.NodeID)
		case net.ParseIP(c.BindAddr) == nil:
			t.Fatalf("bind_addr %q", c.BindAddr)
		case c.GossipPort < 1 || c.GossipPort > 65535 || c.PeerPort < 1 || c.PeerPort > 65535 || c.PeerPort == c.GossipPort:
			t.Fatalf("ports %d %d", c.GossipPort, c.PeerPort)
		case c.SecretFile == "" || c.StateDir == "" || c.Socket == "":
			t.Fatalf("secret_file %q, state_dir %q, socket %q", c.SecretFile, c.StateDir, c.Socket)
		case c.Capacity < 0 || c.Capacity > 4096:
			t.Fatalf("capacity %v", c.Capacity)
		case c.Load.Interval < 10*time.Millisecond || c.Load.Interval > time.Hour || c.Load.VectorSize < 1 || c.Load.VectorSize > 1024:
			t.Fatalf("load %+v", c.Load)
		}
		for _, p := range append([]string{c.InitPath, c.ImageDir, c.CRIUPath}, c.SharedDirs...) {
			if p != "" && !filepath.IsAbs(p) {
				t.Fatalf("path %q is not absolute", p)
			}
		}
		if j := c.JobCgroup; j != "" && j != "none" && (filepath.IsAbs(j) || filepath.Clean(j) != j || strings.HasPrefix(j, "..")) {
			t.Fatalf("job_cgroup %q", j)
		}
		again, err := ParseConfig(c.Marshal())
		if err != nil {
			t.Fatalf("the config rendered does not parse: %v\n%s", err, c.Marshal())
		}
		if !bytes.Equal(again.Marshal(), c.Marshal()) {
			t.Fatalf("the config changed on a round trip:\n%s\nthen\n%s", c.Marshal(), again.Marshal())
		}
	})
}

// fzFinite fails on a float field anywhere in v that is NaN or infinite:
// no range check holds for those.
func fzFinite(t *testing.T, at string, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.Float32, reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) {
			t.Fatalf("%s is %v", at, f)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			fzFinite(t, at+"."+v.Type().Field(i).Name, v.Field(i))
		}
	}
}

// ---- memberlist ----

// FuzzGossipMeta: a member's metadata (memberUp) makes it a live peer
// with a capacity that is a finite number, not negative, and a peer
// address of its IP and a port; metadata a peer makes (NodeMeta) comes
// through as it was.
func FuzzGossipMeta(f *testing.F) {
	src, _ := fzBare(f)
	f.Add(src.delegateMeta(), "n3", []byte{10, 0, 0, 3})
	f.Add([]byte(`{"c":0.25,"p":65535}`), "n3.example", []byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 3})
	f.Add([]byte(`{"c":-1,"p":7947}`), "n3", []byte{10, 0, 0, 3})
	f.Add([]byte(`{"c":1,"p":65536}`), "n3", []byte{10, 0, 0, 3})
	f.Add([]byte(`{"c":1e308,"p":0}`), "n3", []byte{10, 0, 0, 3})
	f.Add([]byte(`{"c":"4"}`), fzSelf, []byte{10, 0, 0, 3})
	f.Add([]byte{}, "n3", []byte{})
	var pool fzBarePool
	f.Fuzz(func(t *testing.T, md []byte, name string, ip []byte) {
		a := pool.get(t)
		a.memberUp(&memberlist.Node{Name: name, Addr: net.IP(ip), Port: 7946, Meta: md})
		a.mu.Lock()
		p := a.known[name]
		a.mu.Unlock()
		if name == fzSelf {
			if p != nil {
				t.Fatal("the node took a member of its own name")
			}
			return
		}
		if p == nil || !p.alive {
			t.Fatalf("member %q not up: %+v", name, p)
		}
		if math.IsNaN(p.capacity) || math.IsInf(p.capacity, 0) || p.capacity < 0 {
			t.Fatalf("capacity %v from %q", p.capacity, md)
		}
		host, port, err := net.SplitHostPort(p.peerAddr)
		if err != nil || host != net.IP(ip).String() {
			t.Fatalf("peer address %q for IP %v: %v", p.peerAddr, net.IP(ip), err)
		}
		if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
			t.Fatalf("peer port %q", port)
		}
		var m meta
		if json.Unmarshal(md, &m) == nil && m.Capacity >= 0 && m.PeerPort >= 0 && m.PeerPort <= 65535 &&
			(p.capacity != m.Capacity || port != strconv.Itoa(m.PeerPort)) {
			t.Fatalf("metadata %q taken as capacity %v, address %s", md, p.capacity, p.peerAddr)
		}
	})
}

// delegateMeta is what the agent gossips of itself.
func (a *Agent) delegateMeta() []byte { return (*delegate)(a).NodeMeta(512) }

// FuzzGossipState: a peer's push/pull state (MergeRemoteState) replaces
// this node's policy only with one of a later version (or, of the same
// version, a greater text) that parses, and never makes the node's
// version go back; the state a node then sends (LocalState) gives a node
// with an older version the same policy and version, and changes nothing
// on a node that has it.
func FuzzGossipState(f *testing.F) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, name := range []string{"balance", "static", "threshold"} {
		f.Add(fzJSON(f, api.PolicyRequest{Text: sched.Builtin[name], At: at.Add(time.Hour), Version: 6}))
	}
	f.Add(fzJSON(f, api.PolicyRequest{Text: sched.Builtin["balance"], At: at.Add(-time.Hour), Version: 4}))
	f.Add(fzJSON(f, api.PolicyRequest{Text: sched.Builtin["static"], At: at, Version: 5}))
	f.Add(fzJSON(f, api.PolicyRequest{Text: sched.Builtin["balance"]}))
	f.Add(fzJSON(f, api.PolicyRequest{Text: "name: x\nplacement: nowhere\n", At: at.Add(time.Hour), Version: 7}))
	f.Add([]byte(`{"text":"name: p\n","version":18446744073709551615}`))
	f.Add([]byte(`{"text":"name: zzz\n","at":"9999-12-31T23:59:59-23:59","version":5}`))
	f.Add([]byte(`{"version":9}`))
	f.Add([]byte("null"))
	const ver = 5
	mosix, err := sched.ParsePolicy([]byte(sched.Builtin["mosix"]))
	if err != nil {
		f.Fatal(err)
	}
	var pa, pb fzBarePool
	f.Fuzz(func(t *testing.T, buf []byte) {
		a := pa.get(t)
		a.setPolicy(mosix, ver, at)
		(*delegate)(a).MergeRemoteState(buf, false)
		a.sch.mu.Lock()
		pol, polVer := a.sch.pol, a.sch.polVer
		a.sch.mu.Unlock()
		if polVer < ver {
			t.Fatalf("policy version went back to %d", polVer)
		}
		if pol.Text() != mosix.Text() || polVer != ver {
			var st api.PolicyRequest
			if json.Unmarshal(buf, &st) != nil || !policyNewer(st.Version, st.Text, ver, mosix.Text()) || polVer != st.Version || st.Version > maxPolicyVersion {
				t.Fatalf("policy replaced by %q version %d from %q", pol.Policy.Name, polVer, buf)
			}
			if _, err := sched.ParsePolicy([]byte(st.Text)); err != nil {
				t.Fatalf("a policy that does not parse was taken: %v", err)
			}
		}
		state := (*delegate)(a).LocalState(false)
		(*delegate)(a).MergeRemoteState(state, false)
		a.sch.mu.Lock()
		again, againVer := a.sch.pol, a.sch.polVer
		a.sch.mu.Unlock()
		if again != pol || againVer != polVer {
			t.Fatalf("the node's own state %q changed its policy", state)
		}
		b := pb.get(t)
		b.setPolicy(mosix, ver-1, at)
		(*delegate)(b).MergeRemoteState(state, false)
		b.sch.mu.Lock()
		got, gotVer := b.sch.pol.Text(), b.sch.polVer
		b.sch.mu.Unlock()
		if got != pol.Text() || gotVer != polVer {
			t.Fatalf("a peer took %q version %d from state %q, want version %d", got, gotVer, state, polVer)
		}
	})
}

// FuzzLoadMessage: a load message is counted once, as received,
// malformed or oversized; a received one is kept or discarded, and the
// load vector has the sender exactly when it was kept.
func FuzzLoadMessage(f *testing.F) {
	f.Add(load.EncodeMessage(load.Entry{Node: "n3", Addr: "10.0.0.3:7947", Capacity: 4, Load: 0.5, MemFreeMB: 1024}))
	f.Add(load.EncodeMessage(load.Entry{Node: fzSelf, Addr: "10.0.0.2:7947", Capacity: 4, Load: 0.5, MemFreeMB: 1024}))
	f.Add([]byte("\x01{\"n\":\"n3\",\"c\":0,\"l\":0,\"m\":0}"))
	f.Add(bytes.Repeat([]byte{1}, load.MaxMessageSize+1))
	f.Add([]byte{})
	var pool fzBarePool
	f.Fuzz(func(t *testing.T, b []byte) {
		a := pool.get(t)
		(*delegate)(a).NotifyMsg(b)
		s := a.Stats()
		if s.LoadReceived+s.LoadMalformed+s.LoadOversized != 1 || s.LoadKept+s.LoadDiscarded != s.LoadReceived {
			t.Fatalf("counted %+v", s)
		}
		e, err := load.DecodeMessage(b)
		a.mu.Lock()
		_, held := a.dis.Vector.Get(e.Node)
		n := a.dis.Vector.Len()
		a.mu.Unlock()
		if (err == nil && held) != (s.LoadKept == 1) || n != int(s.LoadKept) {
			t.Fatalf("counted %+v, vector holds %d entries (sender's: %v)", s, n, held)
		}
	})
}

// ---- peer port: jobs ----

// FuzzPeerStart: /v1/peer/start answers every spec, and only specs whose
// id is HOME.SEQ of the requester's home (a node id), with a home address
// that is one, reach the node's launcher: a spool directory or cgroup
// named by the id stays where it belongs.
func FuzzPeerStart(f *testing.F) {
	spec := job.Spec{ID: "n1.7", UID: 1000, GID: 1000, Argv: []string{"/bin/sleep", "100"}, Env: []string{"HOME=/home/u"}, Cwd: "/home/u"}
	f.Add(fzJSON(f, startRequest{Home: "n1", HomeAddr: "10.0.0.1:7947", Jobs: []job.Spec{spec}}))
	two := spec
	two.ID, two.Pin, two.Stdin = "n1.8", true, true
	f.Add(fzJSON(f, startRequest{Home: "n1", HomeAddr: "[fd00::1]:7947", Jobs: []job.Spec{spec, two}}))
	for _, id := range []string{"../../evil.1", "n1/../../evil.1", "n2.1", ".n1.1", "n1.-1", "n1.1 ", "n1.", "n1..1"} {
		bad := spec
		bad.ID = id
		f.Add(fzJSON(f, startRequest{Home: "n1", HomeAddr: "10.0.0.1:7947", Jobs: []job.Spec{bad}}))
	}
	f.Add(fzJSON(f, startRequest{Home: "..", HomeAddr: "10.0.0.1:7947", Jobs: []job.Spec{{ID: "...1"}}}))
	f.Add(fzJSON(f, startRequest{Home: "n1", HomeAddr: "../x", Jobs: []job.Spec{spec}}))
	f.Add([]byte(`{"home":"n1","home_addr":"10.0.0.1:1","jobs":[{"id":"n1.1"}]} trailing`))
	f.Add([]byte(`{"jobs":null}`))
	f.Add([]byte(`[`))
	pool := newFzPool(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		a := pool.get(t)
		w := a.call(http.MethodPost, "/v1/peer/start", body)
		fzStatus(t, w, "start")
		var req startRequest
		if !fzDecode(body, &req) {
			if w.Code != http.StatusBadRequest {
				t.Fatalf("a body that does not decode answered %d", w.Code)
			}
			return
		}
		var res []startResult
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &res) != nil || len(res) != len(req.Jobs) {
			t.Fatalf("%d specs answered %d: %s", len(req.Jobs), w.Code, w.Body)
		}
		for _, s := range a.node.started {
			if !fzNodeID.MatchString(req.Home) || !fzSafeJobID(s.ID) || !strings.HasPrefix(s.ID, req.Home+".") {
				t.Fatalf("job %q of home %q reached the launcher", s.ID, req.Home)
			}
			if _, err := netip.ParseAddrPort(req.HomeAddr); err != nil {
				t.Fatalf("job %q started for home address %q", s.ID, req.HomeAddr)
			}
		}
	})
}

// FuzzPeerUpdates: /v1/peer/updates acks every job it was told of, with
// offsets that are never negative; a job's output grows only by what an
// update carried, at its offset; a job ends only with an exit from its
// news; "gone" is said only of a job of this home that it has no record
// of.
func FuzzPeerUpdates(f *testing.F) {
	exit := 3
	f.Add(fzJSON(f, []update{{ID: fzHome, Node: "n3", OutOff: 6, Out: []byte("world\n"), ErrOff: 0}}))
	f.Add(fzJSON(f, []update{{ID: fzHome, Node: "n3", OutOff: 6, ErrOff: 0, Exit: &exit, FinalOut: 6, FinalErr: 0}}))
	f.Add(fzJSON(f, []update{{ID: fzHome, Node: "n3", OutOff: 2, Out: []byte("llo\nagain"), ErrOff: 0, Err: []byte("e")}}))
	f.Add(fzJSON(f, []update{{ID: fzHome, OutOff: -1, ErrOff: -1}}))
	f.Add(fzJSON(f, []update{{ID: fzLost, Node: "n4", OutOff: 0, Out: []byte("back")}}))
	f.Add(fzJSON(f, []update{{ID: fzOver, Node: "n3", OutOff: 0, Exit: &exit}}))
	f.Add(fzJSON(f, []update{{ID: "n2.99", Node: "n3"}, {ID: "n1.99", Node: "n3"}, {ID: "../n2.1", Node: "n3"}}))
	f.Add(fzJSON(f, []update{{ID: fzHome, OutOff: 9223372036854775807, Out: []byte("x")}, {ID: fzHome, OutOff: 100, Out: []byte("gap")}}))
	f.Add([]byte(`[{"id":"n2.1","out_off":0,"out":"not base64"}]`))
	f.Add([]byte(`{}`))
	pool := newFzPool(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		a := pool.get(t)
		before, _ := os.ReadFile(a.seededOutput())
		w := a.call(http.MethodPost, "/v1/peer/updates", body)
		fzStatus(t, w, "updates")
		var ups []update
		if !fzDecode(body, &ups) {
			return
		}
		var acks map[string]ack
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &acks) != nil {
			t.Fatalf("answered %d: %s", w.Code, w.Body)
		}
		exits := map[string]bool{}
		var sent [][]byte
		for _, u := range ups {
			k, ok := acks[u.ID]
			switch {
			case !ok:
				t.Fatalf("no ack for %q", u.ID)
			case k.Out < 0 || k.Err < 0:
				t.Fatalf("ack %+v for %q", k, u.ID)
			case k.Gone && (a.jobs.home[u.ID] != nil || !strings.HasPrefix(u.ID, fzSelf+".")):
				t.Fatalf("%q said gone", u.ID)
			}
			if u.Exit != nil {
				exits[u.ID] = true
			}
			if u.ID == fzHome {
				sent = append(sent, u.Out)
			}
		}
		for id, r := range a.jobs.home {
			if r.State == job.StateFinished && id != fzOver && !exits[id] {
				t.Fatalf("job %s finished without an exit in its news", id)
			}
		}
		after, _ := os.ReadFile(a.seededOutput())
		if !bytes.HasPrefix(after, before) {
			t.Fatalf("output %q became %q", before, after)
		}
		for added := after[len(before):]; len(added) > 0; {
			found := false
			for _, s := range sent {
				for i := 0; i < len(s) && !found; i++ {
					if bytes.HasPrefix(added, s[i:]) {
						added, found = added[len(s)-i:], true
					}
				}
			}
			if !found {
				t.Fatalf("output grew by %q, which no update carried", added)
			}
		}
	})
}

// FuzzPeerSignal: /v1/peer/signal delivers only a signal of 1 to 64, and
// only to a job that runs here.
func FuzzPeerSignal(f *testing.F) {
	f.Add(fzJSON(f, signalRequest{ID: fzLocal, Signal: 15}))
	f.Add(fzJSON(f, signalRequest{ID: fzPinned, Signal: 9}))
	f.Add(fzJSON(f, signalRequest{ID: fzLocal, Signal: 64}))
	f.Add(fzJSON(f, signalRequest{ID: fzLocal, Signal: 0}))
	f.Add(fzJSON(f, signalRequest{ID: fzLocal, Signal: 65}))
	f.Add(fzJSON(f, signalRequest{ID: fzLocal, Signal: -9}))
	f.Add(fzJSON(f, signalRequest{ID: "n1.404", Signal: 15}))
	f.Add([]byte(`{"id":"n1.5","signal":4294967311}`))
	pool := newFzPool(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		a := pool.get(t)
		w := a.call(http.MethodPost, "/v1/peer/signal", body)
		fzStatus(t, w, "signal")
		var req signalRequest
		ok := fzDecode(body, &req)
		for _, s := range a.node.signals {
			if !ok || s.sig < 1 || s.sig > 64 || int(s.sig) != req.Signal || s.pid != fzPID || req.ID != fzLocal {
				t.Fatalf("signal %d to pid %d delivered for %q", s.sig, s.pid, body)
			}
		}
		if ok && (req.Signal < 1 || req.Signal > 64) && w.Code != http.StatusBadRequest {
			t.Fatalf("signal %d answered %d", req.Signal, w.Code)
		}
	})
}

// FuzzPeerNote: /v1/peer/note changes only a record of this home; its
// migrations never go back, its log stays bounded and holds a migration
// once, and a finished job stays finished where it was (a lost one may
// come back: docs/security.md).
func FuzzPeerNote(f *testing.F) {
	yes, no := true, false
	f.Add(fzJSON(f, jobNote{ID: fzHome, Migration: &api.Migration{MID: "00000000000000bb", Seq: 3, From: "n3", To: "n4", OK: true}}))
	f.Add(fzJSON(f, jobNote{ID: fzHome, Migration: &api.Migration{MID: fzMID, Seq: 9, From: "n3", To: "n5", OK: true}}))
	f.Add(fzJSON(f, jobNote{ID: fzHome, Migration: &api.Migration{MID: "00000000000000cc", Seq: 1, From: "n3", To: "n4"}, PinReason: "holds /tmp/x"}))
	f.Add(fzJSON(f, jobNote{ID: fzLost, Migration: &api.Migration{MID: "00000000000000dd", Seq: 1, To: "n5", OK: true}}))
	f.Add(fzJSON(f, jobNote{ID: fzOver, Node: "n9", Manual: &yes}))
	f.Add(fzJSON(f, jobNote{ID: fzHome, Node: "n9", Manual: &no}))
	f.Add(fzJSON(f, jobNote{ID: "n1.1", Node: "n9"}))
	f.Add(fzJSON(f, jobNote{ID: fzHome, Migration: &api.Migration{Seq: -5, OK: true, To: "../x"}}))
	pool := newFzPool(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		a := pool.get(t)
		before := map[string]job.Record{}
		for id, r := range a.jobs.home {
			before[id] = *r
		}
		w := a.call(http.MethodPost, "/v1/peer/note", body)
		fzStatus(t, w, "note")
		var n jobNote
		fzDecode(body, &n)
		for id, r := range a.jobs.home {
			b := before[id]
			switch {
			case id != n.ID && !reflect.DeepEqual(*r, b):
				t.Fatalf("a note of %q changed job %s", n.ID, id)
			case r.Migrations < b.Migrations:
				t.Fatalf("job %s: migrations went from %d to %d", id, b.Migrations, r.Migrations)
			case len(r.MigrationLog) > job.MaxMigrationLog:
				t.Fatalf("job %s: %d migrations logged", id, len(r.MigrationLog))
			case b.State == job.StateFinished && (r.Node != b.Node || r.State != b.State):
				t.Fatalf("finished job %s now %s on %q", id, r.State, r.Node)
			}
			seen := map[string]bool{}
			for _, m := range r.MigrationLog {
				if m.MID != "" && seen[m.MID] {
					t.Fatalf("job %s: migration %s logged twice", id, m.MID)
				}
				seen[m.MID] = true
			}
		}
	})
}

// ---- peer port: migration ----

// fzCheckWire is a migration check as it travels (migrateCheckRequest),
// read on its own so that what a node said yes to can be looked at.
type fzCheckWire struct {
	MID   string `json:"mid"`
	From  string `json:"from"`
	ID    string `json:"id"`
	Files []struct {
		Path   string `json:"path"`
		Access string `json:"access"`
	} `json:"opened"`
	Owner *struct {
		UID, GID uint32
		Groups   []uint32
	} `json:"owner"`
	Lazy bool `json:"lazy"`
}

// FuzzPeerMigrateCheck: /v1/peer/migrate/check says yes only to a
// migration id, a job id, an owner and clean absolute file paths; and a
// check that fails leaves no migration, page sink or image directory
// behind.
func FuzzPeerMigrateCheck(f *testing.F) {
	for _, s := range []string{
		`{"mid":"0123456789abcdef","from":"n1","id":"n1.9","opened":[{"path":"/"},{"path":"/etc/passwd","access":"r","fsid":[1,2],"ino":3,"same":true}],"owner":{"UID":1000,"GID":1000,"Groups":[1000,27]}}`,
		`{"mid":"0123456789abcdef","from":"n1","id":"n1.9","opened":[],"owner":{"UID":1000,"GID":1000},"lazy":true}`,
		`{"mid":"0123456789abcdef","from":"n1","id":"n1.9","owner":{"UID":0,"GID":0}}`,
		`{"mid":"0123456789abcdef","from":"n1","id":"n1.5","owner":{"UID":1000,"GID":1000},"lazy":true}`,
		`{"mid":"../../../../tmp","from":"n1","id":"n1.9","owner":{"UID":1000,"GID":1000},"lazy":true}`,
		`{"mid":"0123456789abcdef","from":"n1","id":"../n1.9","owner":{"UID":1000,"GID":1000},"lazy":true}`,
		`{"mid":"0123456789abcdef","from":"n1","id":"n1.9","opened":[{"path":"relative"}],"owner":{"UID":1000,"GID":1000},"lazy":true}`,
		`{"mid":"0123456789abcdef","from":"n1","id":"n1.9","opened":[{"path":"/a/../etc/shadow","access":"r"}],"owner":{"UID":1000,"GID":1000},"lazy":true}`,
		`{"mid":"0123456789abcdef","from":"n1","id":"n1.9","opened":[{"path":"/etc/passwd","access":"x"}],"owner":{"UID":1000,"GID":1000},"lazy":true}`,
		`{"mid":"0123456789abcdef","from":"n1","id":"n1.9","lazy":true}`,
	} {
		f.Add([]byte(s))
	}
	pool := newFzPool(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		a := pool.get(t)
		w := a.call(http.MethodPost, "/v1/peer/migrate/check", body)
		var req fzCheckWire
		decoded := fzDecode(body, &req)
		clean := decoded && req.Owner != nil
		for _, f := range req.Files {
			clean = clean && f.Path != "" && filepath.IsAbs(f.Path) && filepath.Clean(f.Path) == f.Path &&
				(f.Access == "" || f.Access == "r" || f.Access == "w" || f.Access == "rw")
		}
		// The node's own failures are 5xx: opening the files as their
		// owner (which takes root) and its page sink (which fails here).
		if w.Code >= 500 && a.node.sinks == 0 && !(clean && len(req.Files) > 0) {
			t.Fatalf("check: status %d: %s", w.Code, w.Body)
		}
		if w.Code == http.StatusOK {
			if !decoded || !migrate.ValidMID(req.MID) || !fzSafeJobID(req.ID) || !clean {
				t.Fatalf("check %q accepted", body)
			}
			return
		}
		a.jobs.mu.Lock()
		in, sinks := len(a.migr.in), len(a.migr.sinks)
		a.jobs.mu.Unlock()
		ents, _ := os.ReadDir(a.imageDir)
		if in != 0 || sinks != 0 || len(ents) != 0 {
			t.Fatalf("a refused check left %d migrations, %d sinks, %d image directories", in, sinks, len(ents))
		}
	})
}

// FuzzPeerMigrateStream: /v1/peer/migrate (a member's migration stream,
// header and archive) writes files only directly inside the migration's
// image directory and the job's spool directory, and only once its
// header is valid; what a refused or failed stream wrote is removed.
// (An archive whose entries claim more bytes than the stream holds, a
// sparse file, is left to FuzzReadArchive: here it would fill the disk.)
func FuzzPeerMigrateStream(f *testing.F) {
	h := migrate.Header{MID: "0123456789abcdef", From: "n1", ID: "n1.9", Home: "n1", HomeAddr: "10.0.0.1:7947",
		Mounts: []string{"/home"}, Started: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	stream := func(h migrate.Header, files map[string]string, order ...string) []byte {
		var buf bytes.Buffer
		buf.Write(fzJSON(f, h))
		buf.WriteByte('\n')
		tw := tar.NewWriter(&buf)
		for _, name := range order {
			if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(files[name])), Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}); err != nil {
				f.Fatal(err)
			}
			io.WriteString(tw, files[name])
		}
		tw.Close()
		return buf.Bytes()
	}
	files := map[string]string{"img/inventory.img": "inv", "img/pages-1.img": "pages", "spool/stdout": "out\n", "spool/status": ""}
	f.Add(stream(h, files, "img/inventory.img", "img/pages-1.img", "spool/stdout", "spool/status"))
	f.Add(stream(h, files, "img/inventory.img", "img/inventory.img"))
	f.Add(stream(h, map[string]string{"img/../../x": "x"}, "img/../../x"))
	lazy := h
	lazy.Lazy, lazy.StdinKey = true, "pipe:[7]"
	f.Add(stream(lazy, files, "img/inventory.img"))
	streamed := h
	streamed.Streamed = true
	f.Add(stream(streamed, files, "img/inventory.img"))
	bad := h
	bad.ID, bad.Home = "../../n1.9", "../../n1"
	f.Add(stream(bad, files, "spool/stdout"))
	here := h
	here.ID, here.Home = fzLocal, "n1"
	f.Add(stream(here, files, "spool/stdout"))
	f.Add([]byte("{}\n"))
	pool := newFzPool(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		if fzSparse(body) {
			return
		}
		a := pool.get(t)
		var hdr migrate.Header
		if line, _, ok := bytes.Cut(body, []byte("\n")); ok {
			_ = json.Unmarshal(line, &hdr)
		}
		if migrate.ValidMID(hdr.MID) {
			// The next input may use the same id: the ledger forgets it.
			st := a.store
			t.Cleanup(func() { _ = st.DeleteIn(hdr.MID) })
		}
		images := filepath.Join(a.imageDir, "in-"+hdr.MID)
		spool := a.node.SpoolDir(hdr.ID)
		a.node.onRestore = func(s ckpt.RestoreSpec) {
			if s.Dir != images || s.Mounts[ckpt.JobDir] != spool {
				t.Fatalf("restore from %s with spool %s, want %s and %s", s.Dir, s.Mounts[ckpt.JobDir], images, spool)
			}
			fzOnlyIn(t, a.dir, images, spool)
		}
		w := a.call(http.MethodPost, "/v1/peer/migrate", body)
		// A 5xx is this node's failure (its restore always fails).
		if w.Code == http.StatusOK {
			t.Fatalf("a stream was restored by a node that fails every restore: %s", w.Body)
		}
		if len(a.node.restores) > 0 && hdr.Validate() != nil {
			t.Fatalf("restored from a header that is not valid: %+v", hdr)
		}
		fzOnlyIn(t, a.dir)
	})
}

// fzSparse says an archive after the header line has an entry that
// claims more bytes than the stream holds.
func fzSparse(body []byte) bool {
	_, rest, ok := bytes.Cut(body, []byte("\n"))
	if !ok {
		return false
	}
	tr := tar.NewReader(bufio.NewReader(bytes.NewReader(rest)))
	for {
		h, err := tr.Next()
		if err != nil {
			return false
		}
		if h.Size > int64(len(body)) {
			return true
		}
	}
}

// fzOnlyIn fails on a regular file under root that is not directly in
// one of dirs (the agent's job table and the home spool's seeded output
// excepted).
func fzOnlyIn(t *testing.T, root string, dirs ...string) {
	t.Helper()
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if p == filepath.Join(root, "home", fzHome, "stdout") {
			return nil
		}
		for _, dir := range dirs {
			if filepath.Dir(p) == dir {
				return nil
			}
		}
		t.Fatalf("file %s written (allowed: %v)", p, dirs)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// FuzzPeerQuery: the routes that take a query parameter (a job id or a
// migration id) refuse a malformed id as a bad request and never answer
// with an internal error; releasing a hold frees only a job placed by
// hand, and only the one named.
func FuzzPeerQuery(f *testing.F) {
	for i := range fzQueryRoutes {
		f.Add(uint8(i), fzMID)
		f.Add(uint8(i), fzLocal)
		f.Add(uint8(i), fzHome)
		f.Add(uint8(i), "../../x")
	}
	f.Add(uint8(0), fzPinned)
	f.Add(uint8(7), "2026-01-01T00:00:00Z")
	pool := newFzPool(f)
	f.Fuzz(func(t *testing.T, route uint8, value string) {
		r := fzQueryRoutes[int(route)%len(fzQueryRoutes)]
		a := pool.get(t)
		w := a.call(r.method, r.path+"?"+url.Values{r.param: {value}}.Encode(), []byte(value))
		fzStatus(t, w, r.path)
		if r.param == "mid" && r.path != "/v1/peer/migrate/sink" && !migrate.ValidMID(value) && w.Code != http.StatusBadRequest {
			t.Fatalf("%s?mid=%q answered %d", r.path, value, w.Code)
		}
		for id, lj := range a.jobs.local {
			want := map[string]migrate.Hold{fzLocal: migrate.HoldManual, fzPinned: migrate.HoldPin}[id]
			if r.path == "/v1/peer/hold" && id == fzLocal && value == fzLocal {
				want = migrate.HoldNone
			}
			if lj.rec.Hold != want {
				t.Fatalf("%s?%s=%q: job %s hold %q, want %q", r.path, r.param, value, id, lj.rec.Hold, want)
			}
		}
	})
}

var fzQueryRoutes = []struct{ method, path, param string }{
	{http.MethodPost, "/v1/peer/hold", "id"},
	{http.MethodPost, "/v1/peer/migrate/commit", "mid"},
	{http.MethodPost, "/v1/peer/migrate/abort", "mid"},
	{http.MethodGet, "/v1/peer/migrate/outcome", "mid"},
	{http.MethodGet, "/v1/peer/migrate/sink", "mid"},
	{http.MethodGet, "/v1/peer/record", "id"},
	{http.MethodGet, "/v1/peer/output", "id"},
	{http.MethodGet, "/v1/peer/events", "since"},
	{http.MethodPost, "/v1/peer/stdin", "id"},
	{http.MethodPost, "/v1/peer/ckpt/drop", "id"},
}

// ---- peer port: scheduling ----

// FuzzPeerAdmit: /v1/peer/migrate/admit judges only a move to this node
// whose numbers a policy could make (sched.Move.Check);
// taking one can only add to the node's load and take from its free
// memory, as it answers. Its withdrawal (DELETE, the same body) takes
// only a move to this node, and ends the admission the POST made: the
// node then holds no place.
func FuzzPeerAdmit(f *testing.F) {
	f.Add(fzJSON(f, sched.Move{Job: "n1.7", To: fzSelf, From: "n1", Kind: sched.ProblemCPU, RSSMB: 40, Runnable: 1, SrcLoad: 3, Threshold: 0.25}))
	f.Add(fzJSON(f, sched.Move{Job: "n1.7", To: fzSelf, From: "n1", Kind: sched.ProblemMemory, RSSMB: 300, KeepFreeMB: 64}))
	f.Add(fzJSON(f, sched.Move{Job: "n1.7", To: "n3", From: "n1", Kind: sched.ProblemCPU, SrcLoad: 3}))
	f.Add(fzJSON(f, sched.Move{Job: "", To: fzSelf, Kind: sched.ProblemCPU, SrcLoad: 3}))
	f.Add(fzJSON(f, sched.Move{Job: "n1.7", To: fzSelf, Kind: "disk", SrcLoad: 3}))
	f.Add([]byte(`{"Job":"n1.7","To":"n2","Kind":"cpu","SrcLoad":1e308,"Runnable":-3}`))
	f.Add(fzJSON(f, sched.Move{Job: "n1.7", To: fzSelf, From: "n1", Kind: sched.ProblemTurn, RSSMB: 40, Runnable: 1, SrcLoad: 10, Attained: 3, Behind: 1, TurnEvery: sched.DefaultTurnEvery}))
	f.Add(fzJSON(f, sched.Move{Job: "n1.7", To: fzSelf, From: "n1", Kind: sched.ProblemTurn, Runnable: 1, SrcLoad: 10, Attained: 3, Behind: 1.9, TurnEvery: sched.DefaultTurnEvery}))
	pool := newFzPool(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		a := pool.get(t)
		w := a.call(http.MethodPost, "/v1/peer/migrate/admit", body)
		fzStatus(t, w, "admit")
		var mv sched.Move
		if !fzDecode(body, &mv) {
			if w = a.call(http.MethodDelete, "/v1/peer/migrate/admit", body); w.Code != http.StatusBadRequest {
				t.Fatalf("withdrawal %q answered %d", body, w.Code)
			}
			return
		}
		if mv.Job == "" || mv.To != fzSelf || mv.Check() != nil {
			if w.Code != http.StatusBadRequest {
				t.Fatalf("move %+v answered %d", mv, w.Code)
			}
			w = a.call(http.MethodDelete, "/v1/peer/migrate/admit", body)
			fzStatus(t, w, "withdraw")
			if (mv.Job == "" || mv.To != fzSelf) != (w.Code == http.StatusBadRequest) {
				t.Fatalf("withdrawal of move %+v answered %d", mv, w.Code)
			}
			return
		}
		var r admitResponse
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &r) != nil {
			t.Fatalf("answered %d: %s", w.Code, w.Body)
		}
		load := 1 / a.capacity // the node's one runnable thread
		if r.Refused == "" && (r.Load < load || r.MemFreeMB > 4096 || r.Least > fzLeast || r.Least > mv.Attained) {
			t.Fatalf("took move %+v and answered load %v (from %v), free %v MiB (from 4096), least CPU time %v (from %v)", mv, r.Load, load, r.MemFreeMB, r.Least, fzLeast)
		}
		w = a.call(http.MethodDelete, "/v1/peer/migrate/admit", body)
		fzStatus(t, w, "withdraw")
		var wr withdrawResponse
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &wr) != nil || wr.Ended != (r.Refused == "") {
			t.Fatalf("withdrawal of move %+v (refused %q) answered %d: %s", mv, r.Refused, w.Code, w.Body)
		}
		a.sch.mu.Lock()
		n := a.sch.ledger.Pending(time.Now(), "")
		a.sch.mu.Unlock()
		if n != 0 {
			t.Fatalf("after its withdrawal, %d admissions pending", n)
		}
	})
}

// FuzzPeerPolicy: /v1/peer/policy runs a policy only when it parses,
// answers with the policy it runs, and that policy's text parses.
func FuzzPeerPolicy(f *testing.F) {
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Add(fzJSON(f, api.PolicyRequest{Text: sched.Builtin["balance"], At: at, Version: 3}))
	f.Add(fzJSON(f, api.PolicyRequest{Text: sched.Builtin["static"]}))
	f.Add(fzJSON(f, api.PolicyRequest{Text: sched.Builtin["threshold"], Version: 18446744073709551615}))
	f.Add(fzJSON(f, api.PolicyRequest{Name: "balance"}))
	f.Add(fzJSON(f, api.PolicyRequest{Text: "name: x\nperiod: 1ms\n", At: at}))
	f.Add(fzJSON(f, api.PolicyRequest{Text: "name: x\nprobes: {c: {kind: cpu}}\nanalyzers: {t: {type: threshold, inputs: [c], params: {cpu: 0.5}}}\n", At: at}))
	f.Add([]byte(`{"text":5}`))
	pool := newFzPool(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		a := pool.get(t)
		old := a.policyText()
		w := a.call(http.MethodPost, "/v1/peer/policy", body)
		fzStatus(t, w, "policy")
		now := a.policyText()
		if _, err := sched.ParsePolicy([]byte(now.Text)); err != nil {
			t.Fatalf("the node runs a policy whose text does not parse: %v", err)
		}
		var req api.PolicyRequest
		if w.Code != http.StatusOK {
			if now != old {
				t.Fatalf("a refused policy (%d) replaced %q by %q", w.Code, old.Name, now.Name)
			}
			return
		}
		if !fzDecode(body, &req) {
			t.Fatalf("a body that does not decode answered 200")
		}
		if _, err := sched.ParsePolicy([]byte(req.Text)); err != nil {
			t.Fatalf("policy taken that does not parse: %v", err)
		}
		if req.Version > maxPolicyVersion {
			t.Fatalf("policy of version %d taken, past the bound", req.Version)
		}
		var got api.NodePolicy
		if json.Unmarshal(w.Body.Bytes(), &got) != nil || got != now {
			t.Fatalf("answered %s, the node runs %+v", w.Body, now)
		}
	})
}

// ---- checkpoints and restarts ----

var fzRestartRoutes = []string{"/v1/peer/ckpt/take", "/v1/peer/ckpt/restore", "/v1/peer/reopen", "/v1/peer/reopen/done"}

// FuzzPeerRestart feeds the JSON bodies of the checkpoint and restart
// routes: no panic, no 500, and a running job is never consented a
// restart unless the caller names its node dead (never two copies).
func FuzzPeerRestart(f *testing.F) {
	meta := migrate.CheckpointMeta{Version: 1, At: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Node: "n3", Out: 5,
		Job: migrate.CheckpointJob{Argv: []string{"/bin/true"}, Cwd: "/", Group: fzHome}}
	f.Add(uint8(0), fzJSON(f, checkpointRequest{ID: fzLocal}))
	f.Add(uint8(0), fzJSON(f, checkpointRequest{ID: "../x.1", Stop: true}))
	f.Add(uint8(1), fzJSON(f, reopened{ID: fzHome, Node: "n1", Inc: 1, Home: "n2", HomeAddr: "198.18.0.2:7947"}))
	f.Add(uint8(2), fzJSON(f, reopenRequest{ID: fzHome, Meta: meta, Why: "roam restart"}))
	f.Add(uint8(2), fzJSON(f, reopenRequest{ID: fzOver, Meta: meta, Why: "roam restart"}))
	f.Add(uint8(2), fzJSON(f, reopenRequest{ID: fzLost, Meta: meta, Lost: "n3", Why: "node n3 was declared dead"}))
	f.Add(uint8(3), fzJSON(f, reopenDone{ID: fzOver, Inc: 1, Failed: true, Error: "x"}))
	pool := newFzPool(f)
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		path := fzRestartRoutes[int(route)%len(fzRestartRoutes)]
		a := pool.get(t)
		running := map[string]job.Record{}
		for id, r := range a.jobs.home {
			if r.State == job.StateRunning || r.State == job.StateStarting {
				running[id] = *r
			}
		}
		w := a.call(http.MethodPost, path, body)
		if w.Code >= 500 && w.Code != http.StatusServiceUnavailable {
			t.Fatalf("%s: status %d: %s", path, w.Code, w.Body)
		}
		var req reopenRequest
		if path != "/v1/peer/reopen" || json.Unmarshal(body, &req) != nil {
			return
		}
		for id, b := range running {
			r := a.jobs.home[id]
			if r != nil && r.Inc != b.Inc && (req.Lost == "" || req.Lost != b.Node) {
				t.Fatalf("job %s, running on %s, consented a restart (%+v) with lost %q", id, b.Node, r.Restarts, req.Lost)
			}
		}
	})
}
