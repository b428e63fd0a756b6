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
	"log/slog"
	"math/rand"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"roam/internal/agent/checkpoints"
	"roam/internal/agent/control"
	"roam/internal/agent/gossip"
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
	"roam/internal/agent/scheduler"
	"roam/internal/agent/spool"
	"roam/internal/errkind"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

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

	// rounds is the scheduler's state (package rounds), events its
	// decisions; event records one (scheduler.Recorder).
	rounds *rounds.Rounds
	events *rounds.Events
	event  func(api.Event)
	// sched runs the rounds, admits moves and runs the policy; drain is
	// the node's drain state; gossip is memberlist's side (package
	// gossip). Start builds them (wireScheduling).
	sched  *scheduler.Scheduler
	drain  *scheduler.Drain
	gossip *gossip.Gossip

	// members is the membership and the load vector (package members).
	members *members.Table
	rates   *limits.Rates // the API's per-user request rates

	stats counters

	apiLn, peerLn net.Listener
	apiSrv        *http.Server
	peerSrv       *http.Server
	stop          chan struct{}
	wg            sync.WaitGroup
	closeOnce     sync.Once
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
	a.event = scheduler.Recorder(cfg.NodeID, a.log, a.events)
	a.migr = moves.New[*inbound.Migration, *pages.LazyDump](cfg.NodeID, rankMoves)
	a.keeper = keeper.New(filepath.Join(cfg.StateDir, "checkpoints"), checkpoints.Key(parts.CheckpointKey, parts.GossipKey), cfg.Limits.CheckpointBytes, rankStore)
	a.members = newMembers(cfg, a.capacity, pl.Policy.Placement)
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
	wireScheduling(a)
	a.sched.RestorePolicy()
	a.drain.Restore()
	a.checkpoints = newCheckpoints(a)
	a.news = newNews(a)
	a.peerRoutes(mux)
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
	if err := a.gossip.Start(); err != nil {
		a.Close()
		return err
	}
	a.started = time.Now()
	a.wg.Add(2) // the checkpoints' and the rounds' loops call Done
	a.wg.Go(func() { a.news.LostLoop(a.started) })
	go a.checkpoints.Loop(a.stop, &a.wg)
	a.wg.Go(a.news.PushLoop)
	go a.sched.Loop()
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
		Members: a.members, Rounds: a.rounds, Peers: a.peers, Procs: a.procs, Draining: func() bool { return a.drain.On() }, Event: a.event})
	a.control = control.New(control.Config{Self: a.cfg.NodeID, Jobs: a.jobs, Moves: a.migr, Peers: a.peers, Procs: a.procs,
		SettleWait: restoreTimeout, Attained: scheduler.AttainedFrom,
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
		Event: a.event, KickLoad: func() { a.gossip.Kick() },
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
		Record: func(id string) (job.Record, error) { return a.control.Record(id) }, Draining: func(node string) bool { return a.drain.Of(node) },
		Attained: func(rec job.Local) float64 { return a.sched.Attained(rec) }, KickLoad: func() { a.gossip.Kick() }, Event: a.event,
		DropCheckpoint: func(node, id string, before time.Time) { a.checkpoints.DropOn(node, id, before) }})
	a.in = inbound.New(inbound.Config{Self: a.cfg.NodeID, ImageDir: a.imageDir, Rank: rankMigration, Jobs: a.jobs,
		Moves: a.migr, Store: a.store, Keeper: a.keeper, Members: a.members, Peers: a.peers, Pages: a.pages,
		Rounds: a.rounds, Procs: a.procs, Ckpt: a.ckpt, Log: a.log, Stop: a.stop, WG: &a.wg,
		Draining: func(node string) bool { return a.drain.Of(node) }, CPUHere: func(id string, pid int) float64 { return a.sched.CPUHere(id, pid) }, Event: a.event})
}

// wireScheduling builds the scheduling's owners from the agent's: the
// drain, the scheduler and the gossip. Start calls it once the job table
// is open; the routes that call them read them at each request.
func wireScheduling(a *Agent) {
	a.drain = scheduler.NewDrain(scheduler.DrainConfig{Node: a.cfg.NodeID, Log: a.log, Store: a.store, Jobs: a.jobs,
		Members: a.members, Peers: a.peers, Rounds: a.rounds, Event: a.event,
		Advertise: func() { a.gossip.Advertise() },
		Arriving:  func() int { return len(a.migr.Arrivals()) },
		Leave:     func() { a.Close() },
		Rank:      rankDrain})
	a.sched = scheduler.New(scheduler.Config{Node: a.cfg.NodeID, Capacity: a.capacity, Log: a.log,
		Rounds: a.rounds, Members: a.members, Jobs: a.jobs, Peers: a.peers, Drain: a.drain, Store: a.store,
		Procs: a.procs, Prober: a.prober, Event: a.event,
		Migrate: func(mv sched.Move) (api.Migration, error) {
			return a.out.MigrateOut(peer.MigrateOutRequest{ID: mv.Job, To: mv.To, Why: mv.Why, Lazy: mv.Lazy})
		},
		Stop: a.stop, Group: &a.wg})
	a.gossip = gossip.New(gossip.Config{Node: a.cfg.NodeID, BindAddr: a.cfg.BindAddr, Advertise: a.adv,
		GossipPort: a.cfg.GossipPort, PeerPort: a.cfg.PeerPort, Capacity: a.capacity, Join: a.cfg.Join,
		Interval: a.cfg.Load.Interval, Key: a.parts.GossipKey, Transport: a.parts.Gossip, Log: a.log,
		Members: a.members, Rounds: a.rounds, Jobs: a.jobs, Sched: a.sched, Drain: a.drain, Prober: a.prober,
		Counters: &a.stats.gossip,
		// memberlist's callbacks must not block: the sweep runs beside them.
		Left: func() {
			select {
			case a.memberLeft <- struct{}{}:
			default:
			}
		},
		Stop: a.stop, Group: &a.wg, MetaRank: rankMeta})
}

// Nodes is what `roam nodes` shows (gossip.Gossip.Nodes), for roamd's web
// view.
func (a *Agent) Nodes() []api.NodeInfo { return a.gossip.Nodes() }

// Events is `roam events` (scheduler.Scheduler.Events), for roamd's web
// view.
func (a *Agent) Events(c Caller, since time.Time) []api.Event { return a.sched.Events(c, since) }

// Reload is roamd's SIGHUP: it takes what of a changed config can change
// while the agent runs (scheduler.Scheduler.Reload), and names the rest.
func (a *Agent) Reload(cfg Config) (took, restart []string) { return a.sched.Reload(a.cfg, cfg) }

// Done is closed once the agent stops: after Close, or once it left the
// cluster itself (roam node remove).
func (a *Agent) Done() <-chan struct{} { return a.stop }

// Close leaves the cluster and stops everything. Safe to call twice.
func (a *Agent) Close() error {
	a.closeOnce.Do(func() {
		close(a.stop)
		if a.gossip != nil {
			a.gossip.Leave()
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

func (a *Agent) registerMetrics(reg prometheus.Registerer) {
	counter := func(name, help string, v *atomic.Int64) {
		reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "roam", Name: name, Help: help,
		}, func() float64 { return float64(v.Load()) }))
	}
	s, g := &a.stats, &a.stats.gossip
	counter("gossip_rejected_total", "Gossip packets and streams refused (bad key, truncated, malformed).", &g.Rejected)
	counter("load_messages_received_total", "Load messages accepted.", &g.Received)
	counter("load_messages_malformed_total", "Load messages dropped as malformed.", &g.Malformed)
	counter("load_messages_oversized_total", "Load messages dropped as too large.", &g.Oversized)
	counter("load_messages_sent_total", "Load messages sent.", &g.Sent)
	counter("load_bytes_sent_total", "Bytes of load messages sent (payload).", &g.BytesSent)
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
