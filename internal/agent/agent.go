// Package agent is roamd, the node agent: it joins the cluster through
// memberlist, probes its node, runs the load-information dissemination of
// package load on a timer, starts, relays, migrates, checkpoints and
// restarts jobs, and serves the CLI on a unix socket and other agents on a
// TLS port.
//
// It does the I/O; the decisions it executes come from the pure packages
// (load, sched and migrate). It must never panic on input from the network:
// every message is size-checked and validated before use, and counted when
// dropped.
package agent

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"math/rand"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"roam/internal/agent/checkpoints"
	"roam/internal/agent/config"
	"roam/internal/agent/control"
	"roam/internal/agent/inbound"
	"roam/internal/agent/jobtable"
	"roam/internal/agent/keeper"
	"roam/internal/agent/launch"
	"roam/internal/agent/limits"
	"roam/internal/agent/members"
	"roam/internal/agent/moves"
	"roam/internal/agent/news"
	"roam/internal/agent/outbound"
	"roam/internal/agent/pages"
	"roam/internal/agent/peer"
	"roam/internal/agent/phases"
	"roam/internal/agent/rounds"
	"roam/internal/agent/spool"
	"roam/internal/errkind"
	"roam/internal/lockorder"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"

	"roam/internal/api"
	"roam/internal/ckpt"
	"roam/internal/job"
	"roam/internal/load"
	"roam/internal/rootdir"
	"roam/internal/sched"
)

// Agent is one node's roamd.
type Agent struct {
	cfg      Config
	log      *slog.Logger
	parts    Parts
	capacity float64
	reg      *prometheus.Registry

	ml *memberlist.Memberlist

	store *job.Store
	jobs  *jobtable.Table
	// launch starts jobs (roam run); control signals and lists them
	// (roam kill, roam ps) and looks up their records at their homes.
	launch  *launch.Starter
	control *control.Jobs
	// spools: the home jobs' output; keeper: the checkpoint files held.
	spools *spool.Spools
	// news relays the jobs' output, exit, stdin and loss between the node
	// they run on and their home (package news).
	news   *news.Relay
	keeper *keeper.Keeper
	// checkpoints takes, keeps and restarts jobs' checkpoints (package
	// checkpoints); made in Start, once the job table is open.
	checkpoints *checkpoints.Checkpoints
	// procs, ckpt and prober are parts.Processes, .Checkpointer, .Prober.
	procs  job.Processes
	ckpt   ckpt.Checkpointer
	prober Prober
	// peers calls other agents' peer routes, and this node's own (its
	// SelfAddr) in process through peerMux. Set first in Start, before
	// anything can call a peer.
	peers *peer.Client
	adv   string // the IP address this node advertises
	// started is when Start ran; memberLeft wakes the lost-job sweep.
	started    time.Time
	memberLeft chan struct{}
	peerMux    http.Handler
	migr       *migrTable // the migrations in flight (package moves)
	support    string     // what migration can do here, found at start
	imageDir   string     // where migration images go
	allUsers   bool       // root's CRIU can dump other users' jobs here
	metrics    phases.Metrics

	// pages, out and in drive the migrations (wireMigration): the page
	// streams, the source's side (the migrations and checkpoints leaving
	// this node) and the destination's (those coming here, restarts).
	pages *pages.Streams
	out   *outbound.Driver
	in    *inbound.Driver

	// rounds is the scheduler (package rounds), events its decisions.
	rounds *rounds.Rounds
	events *rounds.Events
	// draining: roam node drain (see drain.go); drainMu orders its changes
	// with the job table's copy.
	draining atomic.Bool
	drainMu  lockorder.Mutex

	// selfLeast is the least CPU time a runnable job here has had, as the
	// last round measured it (sched.Node.Least), as math.Float64bits: read
	// under either lock, it is under none.
	selfLeast atomic.Uint64

	// members is the membership and the load vector (package members).
	members *members.Table
	// loadKick wakes the load loop out of turn: a job here ended or left
	// (kickLoad).
	loadKick chan struct{}
	rates    *limits.Rates // the API's per-user request rates

	stats counters

	apiLn, peerLn net.Listener
	apiSrv        *http.Server
	peerSrv       *http.Server
	stop          chan struct{}
	wg            sync.WaitGroup
	closeOnce     sync.Once
	// metaMu orders this node's re-advertisements of its metadata
	// (memberlist's UpdateNode: drain.go, metaCheck) with metaCheck's
	// reading of what memberlist holds, which UpdateNode writes.
	metaMu lockorder.Mutex
}

// New builds an agent from a validated config and its parts (every one
// but Gossip and Registry required); it opens nothing until Start.
func New(cfg Config, parts Parts, logger *slog.Logger) (*Agent, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	adv, ok := cfg.Advertise()
	if !ok {
		return nil, errkind.New(peer.ErrConfig, "config: advertise_addr: not set and bind_addr is %s (ResolveAdvertise finds one)", cfg.BindAddr)
	}
	switch {
	case parts.API == nil, parts.Transport == nil, parts.Checkpointer == nil, parts.Processes == nil, parts.Prober == nil:
		return nil, errors.New("agent: a part is missing (API, Transport, Checkpointer, Processes and Prober are required)")
	case len(parts.GossipKey) == 0:
		return nil, errors.New("agent: no gossip key")
	}
	a := &Agent{
		cfg:      cfg,
		log:      logger.With("node", cfg.NodeID),
		parts:    parts,
		procs:    parts.Processes,
		ckpt:     parts.Checkpointer,
		prober:   parts.Prober,
		capacity: cfg.Capacity,
		stop:     make(chan struct{}),
		adv:      adv.String(),

		memberLeft: make(chan struct{}, 1),
	}
	a.initLocks()
	if a.capacity == 0 {
		a.capacity = float64(runtime.NumCPU())
	}
	a.reg = parts.Registry
	if a.reg == nil {
		a.reg = prometheus.NewRegistry()
	}
	a.registerMetrics(a.reg)
	a.metrics = phases.NewMetrics(a.reg)
	pl, err := cfg.Policy()
	if err != nil {
		return nil, errkind.New(peer.ErrConfig, "config: scheduler: %v", err)
	}
	a.rounds, a.events = rounds.New(pl, rankSched), &rounds.Events{}
	a.migr = moves.New[*inbound.Migration, *pages.LazyDump](cfg.NodeID, rankMoves)
	a.keeper = keeper.New(filepath.Join(cfg.StateDir, "checkpoints"), checkpoints.Key(parts.CheckpointKey, parts.GossipKey), cfg.Limits.CheckpointBytes, rankStore)
	a.members = newMembers(cfg, a.capacity, pl.Policy.Placement)
	a.loadKick = make(chan struct{}, 1)
	return a, nil
}

// newMembers is an empty members table for the node of cfg.
func newMembers(cfg Config, capacity float64, placement string) *members.Table {
	lp, _ := load.ParsePolicy(cfg.Load.Policy)
	return members.New(members.Config{
		Self: cfg.NodeID, Capacity: capacity, Tau: loadTauIntervals * cfg.Load.Interval,
		Vector: load.NewDisseminator(cfg.NodeID, cfg.Load.VectorSize, lp, cfg.Load.Interval),
		Rng:    rand.New(rand.NewSource(time.Now().UnixNano())), Placement: placement, Rank: rankMembers,
	})
}

// Start opens the sockets, joins the cluster and starts the timers.
func (a *Agent) Start() error {
	var err error
	if a.imageDir, err = prepareDirs(a.cfg, a.keeper); err != nil {
		return err
	}
	// The peer client runs this node's own routes in process, and the
	// owners the routes name call peers: the mux comes first, and its
	// routes once those owners are made (nothing in between calls one).
	mux := http.NewServeMux()
	a.peerMux = mux
	a.peers = newPeerClient(a)
	a.members.Join(members.Member{Addr: net.JoinHostPort(a.adv, strconv.Itoa(a.cfg.GossipPort)), PeerAddr: a.peers.SelfAddr,
		Capacity: a.capacity, Version: api.Version}, a.prober.MemFreeMB(), time.Now())
	if err := a.openJobs(); err != nil {
		return err
	}
	a.checkpoints = newCheckpoints(a)
	a.news = newNews(a)
	a.peerRoutes(mux)
	a.keptPolicy()
	a.loadDrain()
	a.support, a.allUsers = a.ckpt.Support()
	wireMigration(a)
	if err := a.startAPI(); err != nil {
		a.store.Close()
		return err
	}
	if err := a.startPeer(); err != nil {
		a.Close()
		return err
	}
	// Before the push loop and the policies see the jobs.
	now := time.Now()
	a.in.Recover(now, a.out.Recover(now))
	ml, err := memberlist.Create(memberlistConfig(a))
	if err != nil {
		a.Close()
		return fmt.Errorf("memberlist: %w", err)
	}
	a.ml = ml
	a.started = time.Now()
	a.wg.Add(4)
	a.wg.Go(func() { a.news.LostLoop(a.started) })
	go a.checkpoints.Loop(a.stop, &a.wg)
	go a.joinLoop()
	go a.loadLoop()
	a.wg.Go(a.news.PushLoop)
	go a.rounds.Loop(a.stop, &a.wg, rounds.Round{Snapshot: a.snapshot, Decide: a.members.Decide, Move: a.move})
	a.log.Info("agent started", "bind", a.cfg.BindAddr, "advertise", a.adv, "capacity", a.capacity, "cgroup", a.cfg.Cgroup,
		"policy", a.cfg.Load.Policy, "vector", a.cfg.Load.VectorSize, "interval", a.cfg.Load.Interval,
		"migration", a.support)
	return nil
}

// openJobs opens the job table, builds what starts, signals and lists
// jobs on it, and reloads what an earlier run left.
func (a *Agent) openJobs() error {
	st, err := job.Open(filepath.Join(a.cfg.StateDir, "state.db"))
	if err != nil {
		return err
	}
	a.store = st
	a.spools = spool.New(filepath.Join(a.cfg.StateDir, "home"), rankSpool)
	a.jobs = jobtable.New(st, a.spools, rankJobs)
	a.wireJobs()
	return a.launch.Reload(time.Now())
}

// wireJobs builds launch and control on the agent's owners as they
// are now: at start, and in the fuzz harness after it puts new ones in
// place.
func (a *Agent) wireJobs() {
	a.launch = launch.New(launch.Config{Self: a.cfg.NodeID, Limits: a.cfg.Limits, Log: a.log, Store: a.store, Jobs: a.jobs, Spools: a.spools,
		Members: a.members, Rounds: a.rounds, Peers: a.peers, Procs: a.procs, Draining: a.draining.Load, Event: a.event})
	a.control = control.New(control.Config{Self: a.cfg.NodeID, Jobs: a.jobs, Moves: a.migr, Peers: a.peers, Procs: a.procs,
		SettleWait: restoreTimeout, Attained: attainedFrom,
		Parts: func() []peer.PSPart { return fanOut[peer.PSPart](a, http.MethodGet, peer.PS, nil) }})
}

// PS is `roam ps` for roamd's web view (cmd/roamd), as the socket's
// route answers it.
func (a *Agent) PS(c Caller, all bool) []api.Job { return a.control.PS(c, all) }

// prepareDirs makes the state and image directories root's alone (root
// removes, unpacks and restores below them: nobody else may control any
// directory on their paths), and removes what an earlier run left
// half-done in them: partial checkpoint files, migrations' images.
func prepareDirs(cfg Config, k *keeper.Keeper) (imageDir string, err error) {
	imageDir = cfg.ImageDirOrDefault()
	if err := rootdir.Ensure(cfg.StateDir, 0o755); err != nil {
		return "", errkind.New(peer.ErrConfig, "state_dir: %v", err)
	}
	if err := rootdir.Ensure(imageDir, 0o700); err != nil {
		return "", errkind.New(peer.ErrConfig, "image_dir: %v", err)
	}
	k.RemovePartial()
	if ents, err := os.ReadDir(imageDir); err == nil {
		for _, e := range ents {
			os.RemoveAll(filepath.Join(imageDir, e.Name()))
		}
	}
	return imageDir, nil
}

// newPeerClient calls other agents' peer routes over the transport, and
// this node's own in process.
func newPeerClient(a *Agent) *peer.Client {
	return &peer.Client{
		Addr: a.members.PeerAddr,
		HTTP: &http.Client{Transport: &http.Transport{
			DialTLSContext:  func(ctx context.Context, _, addr string) (net.Conn, error) { return a.parts.Transport.Dial(ctx, addr) },
			WriteBufferSize: 256 << 10, ReadBufferSize: 64 << 10,
		}},
		Self:     &http.Client{Transport: peer.Loopback{Routes: a.peerMux, Log: a.log}},
		SelfAddr: net.JoinHostPort(a.adv, strconv.Itoa(a.cfg.PeerPort)),
	}
}

// newNews is the relay of a's jobs' news, wired to its owners, and to the
// concerns in the agent through closures.
func newNews(a *Agent) *news.Relay {
	return news.New(news.Config{
		Self: a.cfg.NodeID, Limits: a.cfg.Limits,
		Jobs: a.jobs, Spools: a.spools, Members: a.members, Peers: a.peers, Rounds: a.rounds, Procs: a.procs, Log: a.log,
		Stop: a.stop, Left: a.memberLeft,
		Event: a.event, KickLoad: a.kickLoad,
		Record:         func(id string) (job.Record, error) { return a.control.Record(id) },
		DropCheckpoint: func(node, id string, before time.Time) { a.checkpoints.DropOn(node, id, before) },
		RestartLost:    func(rec job.Record, lost string) { a.checkpoints.RestartLost(rec, lost) },
		MovedTo:        func(id string) string { _, _, to := a.control.Settled(id); return to },
		PurgeHomes: func(req peer.PurgeRequest) []api.PurgeResult {
			return fanOut[api.PurgeResult](a, http.MethodPost, peer.Purge, req)
		},
	})
}

// wireMigration builds the migration drivers from the agent's owners and
// parts, once Start has them all (the directories, the job table, the
// peer client) and before any request can come in.
func wireMigration(a *Agent) {
	a.pages = pages.New(pages.Config{ImageDir: a.imageDir, Moves: a.migr, Ckpt: a.ckpt, Members: a.members, Peers: a.peers,
		Dial: a.parts.Transport.Dial, Log: a.log})
	a.out = outbound.New(outbound.Config{Self: a.cfg.NodeID, ImageDir: a.imageDir, AllUsers: a.allUsers, Jobs: a.jobs,
		Moves: a.migr, Store: a.store, Keeper: a.keeper, Members: a.members, Peers: a.peers, Pages: a.pages,
		Procs: a.procs, Ckpt: a.ckpt, Metrics: a.metrics, Log: a.log, Stop: a.stop, WG: &a.wg,
		Record: func(id string) (job.Record, error) { return a.control.Record(id) }, Draining: a.isDraining, Attained: a.attained, KickLoad: a.kickLoad, Event: a.event,
		DropCheckpoint: func(node, id string, before time.Time) { a.checkpoints.DropOn(node, id, before) }})
	a.in = inbound.New(inbound.Config{Self: a.cfg.NodeID, ImageDir: a.imageDir, Rank: rankMigration, Jobs: a.jobs,
		Moves: a.migr, Store: a.store, Keeper: a.keeper, Members: a.members, Peers: a.peers, Pages: a.pages,
		Rounds: a.rounds, Procs: a.procs, Ckpt: a.ckpt, Log: a.log, Stop: a.stop, WG: &a.wg,
		Draining: a.isDraining, CPUHere: a.cpuHere, Event: a.event})
}

// Done is closed once the agent stops: after Close, or once it left the
// cluster itself (roam node remove).
func (a *Agent) Done() <-chan struct{} { return a.stop }

// Close leaves the cluster and stops everything. Safe to call twice.
func (a *Agent) Close() error {
	a.closeOnce.Do(func() {
		close(a.stop)
		if a.ml != nil {
			_ = a.ml.Leave(time.Second)
			_ = a.ml.Shutdown()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if a.apiSrv != nil {
			_ = a.apiSrv.Shutdown(ctx)
		}
		if a.peerSrv != nil {
			_ = a.peerSrv.Shutdown(ctx)
		}
		a.wg.Wait()
		if a.peers != nil {
			a.peers.HTTP.CloseIdleConnections()
		}
		if a.store != nil {
			a.store.Close()
		}
	})
	return nil
}

// joinLoop joins through the configured peers, and tries again while the
// agent is alone (a peer may start after us, or may have restarted).
func (a *Agent) joinLoop() {
	defer a.wg.Done()
	var others []string
	self := net.JoinHostPort(a.adv, strconv.Itoa(a.cfg.GossipPort))
	for _, j := range a.cfg.Join {
		if j = config.JoinAddr(j, a.cfg.GossipPort); j != self {
			others = append(others, j)
		}
	}
	if len(others) == 0 {
		return
	}
	t := time.NewTicker(joinRetry)
	defer t.Stop()
	for {
		if a.ml.NumMembers() <= 1 {
			if n, err := a.ml.Join(others); err != nil {
				a.log.Debug("join", "joined", n, "err", err)
			}
		}
		select {
		case <-a.stop:
			return
		case <-t.C:
		}
	}
}

// loadLoop samples the node's CPU load several times per interval, and
// sends its load to the targets the dissemination protocol picks.
func (a *Agent) loadLoop() {
	defer a.wg.Done()
	t := time.NewTicker(a.cfg.Load.Interval / probesPerInterval)
	defer t.Stop()
	for {
		select {
		case <-a.stop:
			return
		case now := <-t.C:
			a.step(now)
			a.metaCheck()
		case <-a.loadKick:
			a.step(time.Now())
		}
	}
}

// kickLoad has the load loop probe now, out of turn: a job here ended or
// left. A node that goes idle tells the busier nodes at once
// (load.Disseminator.News), rather than at the next probe, up to a
// quarter interval later, while their jobs wait for a CPU.
func (a *Agent) kickLoad() {
	select {
	case a.loadKick <- struct{}{}:
	default:
	}
}

// pending is the load of the moves this node admitted and has not yet
// received (sched.Ledger.Reserved), and the least CPU time of its jobs
// (sched.Node.Least) with theirs counted in. The load it sends counts
// them, as its answers to moves do: a peer that a refusal told of them
// would otherwise forget them at this node's next entry, measured before
// the jobs arrive, and choose this node again.
func (a *Agent) pending(now time.Time) sched.Node {
	return a.rounds.Reserved(sched.Node{Capacity: a.capacity, Least: a.least()}, now)
}

// least is selfLeast.
func (a *Agent) least() float64 { return math.Float64frombits(a.selfLeast.Load()) }

// step is one timer tick: probe, then maybe send.
func (a *Agent) step(now time.Time) {
	runnable := a.runnable()
	mem := a.prober.MemFreeMB()
	pending := a.pending(now)
	targets, msg := a.members.Probe(now, runnable, mem, a.jobs.Count(), pending)
	if len(targets) == 0 {
		return
	}
	byName := map[string]*memberlist.Node{}
	for _, n := range a.ml.Members() {
		byName[n.Name] = n
	}
	for _, id := range targets {
		n := byName[id]
		if n == nil {
			continue
		}
		if err := a.ml.SendBestEffort(n, msg); err != nil {
			a.log.Debug("send load", "to", id, "err", err)
			continue
		}
		a.stats.loadSent.Add(1)
		a.stats.loadBytesSent.Add(int64(len(msg)))
	}
}

// Nodes is what `roam nodes` shows: every member this agent has heard of,
// with load and memory from its load vector.
func (a *Agent) Nodes() []api.NodeInfo { return a.members.Nodes(time.Now(), a.draining.Load()) }

// handleLoadMessage takes a user message from memberlist: already decrypted
// and authenticated, but still untrusted.
func (a *Agent) handleLoadMessage(b []byte) {
	e, err := load.DecodeMessage(b)
	switch {
	case errors.Is(err, load.ErrOversized):
		a.stats.loadOversized.Add(1)
		return
	case err != nil:
		a.stats.loadMalformed.Add(1)
		return
	}
	a.stats.loadReceived.Add(1)
	r := a.members.Receive(time.Now(), e)
	kept, eases := r.Kept, r.Eased
	if r.Live && !eases {
		// Or a node that refused this node's move has room now, which
		// the vector's last entry may have shown all along.
		eases = a.rounds.Eased(e.Node, e.Load, e.Capacity, r.SelfLoad)
	}
	if kept {
		a.stats.loadKept.Add(1)
	} else {
		a.stats.loadDiscarded.Add(1)
	}
	if eases {
		// A peer could take one of this node's jobs now: judge at once
		// rather than at the period (a passive policy's round).
		a.rounds.Kick()
	}
}

func (a *Agent) registerMetrics(reg prometheus.Registerer) {
	counter := func(name, help string, v *atomic.Int64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "roam", Name: name, Help: help,
		}, func() float64 { return float64(v.Load()) }))
	}
	s := &a.stats
	counter("gossip_rejected_total", "Gossip packets and streams refused (bad key, truncated, malformed).", &s.gossipRejected)
	counter("load_messages_received_total", "Load messages accepted.", &s.loadReceived)
	counter("load_messages_malformed_total", "Load messages dropped as malformed.", &s.loadMalformed)
	counter("load_messages_oversized_total", "Load messages dropped as too large.", &s.loadOversized)
	counter("load_messages_sent_total", "Load messages sent.", &s.loadSent)
	counter("load_bytes_sent_total", "Bytes of load messages sent (payload).", &s.loadBytesSent)
	counter("peer_rejected_total", "Agent-to-agent TLS connections refused.", &s.peerRejected)
	counter("connections_refused_total", "Connections closed over limits.connections, connections_per_user or peer_connections.", &s.connRefused)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "roam", Name: "node_load", Help: "Smoothed runnable threads per unit of capacity.",
	}, func() float64 { l, _ := a.members.Self(); return l }))
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: "roam", Name: "node_mem_free_bytes", Help: "Memory free to the node in bytes.",
	}, func() float64 { _, m := a.members.Self(); return m * (1 << 20) }))
}

// socketDir makes sure the socket's directory exists, root's alone.
func socketDir(path string) error { return rootdir.Ensure(filepath.Dir(path), 0o755) }
