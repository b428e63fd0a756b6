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
	"net"
	"net/http"
	"os"
	"path/filepath"
	"roam/internal/agent/checkpoints"
	"roam/internal/agent/config"
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
	"roam/internal/agent/outfiles"
	"roam/internal/agent/pages"
	"roam/internal/agent/peer"
	"roam/internal/agent/phases"
	"roam/internal/agent/rounds"
	"roam/internal/agent/scheduler"
	"roam/internal/agent/spool"
	"roam/internal/agent/stats"
	"roam/internal/errkind"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"roam/internal/api"
	"roam/internal/ckpt"
	"roam/internal/connlimit"
	"roam/internal/job"
	"roam/internal/rootdir"
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
	// files copies the home jobs' output into their files (package
	// outfiles), on a goroutine of its own.
	files *outfiles.Writer
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
	migr       *inbound.Table // the migrations in flight (package moves)
	support    string         // what migration can do here, found at start
	imageDir   string         // where migration images go
	allUsers   bool           // root's CRIU can dump other users' jobs here
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

	stats stats.Counters

	apiLn, peerLn net.Listener
	peerHeld      *connlimit.Listener // the peer port's connections, below TLS
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
	if a.parts.DiskFree == nil {
		a.parts.DiskFree = spool.Free
	}
	if cfg.Jobs.MemoryBytes > 0 {
		a.parts.JobMemory = cfg.Jobs.MemoryBytes
	}
	a.reg = parts.Registry
	if a.reg == nil {
		a.reg = prometheus.NewRegistry()
	}
	a.stats.Register(a.reg, func() (float64, float64) { return a.members.Self() })
	a.metrics = phases.NewMetrics(a.reg)
	pl, err := cfg.Policy()
	if err != nil {
		return nil, errkind.New(peer.ErrConfig, "config: scheduler: %v", err)
	}
	a.rounds, a.events = rounds.New(pl, rankSched), &rounds.Events{}
	a.event = scheduler.Recorder(cfg.NodeID, a.log, a.events)
	a.migr = moves.New[*inbound.Migration, *pages.LazyDump](cfg.NodeID, rankMoves)
	a.keeper = keeper.New(filepath.Join(cfg.StateDir, "checkpoints"), checkpoints.Key(parts.CheckpointKey, parts.GossipKey), cfg.ClusterName, cfg.Limits, rankStore)
	a.members = members.ForNode(cfg.NodeID, cfg.Load, a.capacity, float64(a.parts.JobMemory)/(1<<20), pl.Policy, rankMembers)
	return a, nil
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
		Capacity: a.capacity, Version: api.Version, UserNS: a.parts.UserNS, LazyUserNS: a.parts.LazyUserNS, Slurm: a.cfg.Slurm.NodeName(a.cfg.NodeID),
		Host: a.parts.Host.Bounded()}, a.prober.MemFreeMB(), time.Now())
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
	a.wg.Go(func() { a.checkpoints.SweepLoop(a.stop) })
	a.wg.Go(a.news.PushLoop)
	a.wg.Go(a.news.HoldLoop)
	a.wg.Go(func() { a.launch.ReleaseLoop(a.stop) })
	a.wg.Go(func() { a.files.Loop(a.stop) })
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
	a.files = newFiles(a)
	a.wireJobs()
	return a.launch.Reload(time.Now())
}

// PS is `roam ps` for roamd's web view (cmd/roamd), as the socket's
// route answers it.
func (a *Agent) PS(c Caller, all bool) []api.Job {
	js, _ := a.control.PS(c, all)
	return js
}

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

// Nodes is what `roam nodes` shows (gossip.Gossip.Nodes), for roamd's web
// view.
func (a *Agent) Nodes() []api.NodeInfo { return a.gossip.Nodes() }

// Events is `roam events` (scheduler.Scheduler.Events), for roamd's web
// view.
func (a *Agent) Events(c Caller, since time.Time) []api.Event { return a.sched.Events(c, since) }

// Reload is roamd's SIGHUP: it takes what of a changed config can change
// while the agent runs (scheduler.Scheduler.Reload), and names the rest.
func (a *Agent) Reload(cfg Config) (took, restart []string) { return a.sched.Reload(a.cfg, cfg) }

// Stats returns the agent's counters (package stats).
func (a *Agent) Stats() api.Stats { return a.stats.Stats(a.cfg.NodeID, a.support) }

// Config is roamd's config file (package config).
type Config = config.Config

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
