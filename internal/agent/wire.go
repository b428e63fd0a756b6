package agent

import (
	"io"
	"net/http"
	"roam/internal/agent/checkpoints"
	"roam/internal/agent/control"
	"roam/internal/agent/gossip"
	"roam/internal/agent/inbound"
	"roam/internal/agent/keeper"
	"roam/internal/agent/launch"
	"roam/internal/agent/news"
	"roam/internal/agent/outbound"
	"roam/internal/agent/outfiles"
	"roam/internal/agent/pages"
	"roam/internal/agent/peer"
	"roam/internal/agent/reopen"
	"roam/internal/agent/scheduler"
	"roam/internal/api"
	"roam/internal/job"
	"roam/internal/migrate"
	"roam/internal/sched"
	"time"
)

// The wiring of the agent's concerns: each is an owner's type in a package
// of its own, made here on the owners of the state it reads and writes,
// and given what it needs of another concern as funcs over the agent
// (read at each call, so that the fuzz harness can put new owners in
// place between its inputs).

// wireJobs builds launch and control on the agent's owners as they
// are now: at start, and in the fuzz harness after it puts new ones in
// place.
func (a *Agent) wireJobs() {
	a.launch = launch.New(launch.Config{Self: a.cfg.NodeID, Limits: a.cfg.Limits, Free: func() int64 { return a.parts.DiskFree(a.cfg.StateDir) }, PerJob: a.cfg.Jobs, JobMem: a.parts.JobMemory, Admitted: a.rounds.AdmittedMemMB, Log: a.log, Store: a.store, Jobs: a.jobs, Spools: a.spools,
		Members: a.members, Rounds: a.rounds, Peers: a.peers, Procs: a.procs, Draining: func() bool { return a.drain.On() }, Event: a.event,
		Restore: func(rec job.Record, node string) error { return a.checkpoints.RestorePreempted(rec, node) }, Slurm: a.parts.Slurm, SlurmNode: a.cfg.Slurm.NodeName(a.cfg.NodeID)})
	a.control = control.New(control.Config{Self: a.cfg.NodeID, Jobs: a.jobs, Moves: a.migr, Peers: a.peers, Procs: a.procs,
		SettleWait: peer.RestoreTimeout, Attained: scheduler.AttainedFrom,
		Parts: func() []peer.PSPart { return fanOut[peer.PSPart](a, http.MethodGet, peer.PS, nil) }})
}

// newFiles is the writer of the home jobs' output files, over a's spools
// and job table.
func newFiles(a *Agent) *outfiles.Writer {
	return outfiles.New(outfiles.Config{Spools: a.spools, Log: a.log, Failed: func(id, why string) {
		if err := a.jobs.SetFileError(id, why); err != nil {
			a.log.Error("job table", "err", err)
		}
	}})
}

// newNews is the relay of a's jobs' news, wired to its owners, and to the
// concerns in the agent through closures.
func newNews(a *Agent) *news.Relay {
	return news.New(news.Config{
		Self: a.cfg.NodeID, Limits: a.cfg.Limits, Free: func() int64 { return a.parts.DiskFree(a.cfg.StateDir) }, Fence: a.cfg.Fence, StateDir: a.cfg.StateDir,
		Jobs: a.jobs, Spools: a.spools, Members: a.members, Peers: a.peers, Rounds: a.rounds, Procs: a.procs, Log: a.log, Files: a.files,
		Stop: a.stop, Left: a.memberLeft,
		Event: a.event, KickLoad: func() { a.gossip.Kick() },
		Record:         func(id string) (job.Record, error) { return a.control.Record(id) },
		DropCheckpoint: func(node, id string, before time.Time) { a.checkpoints.DropOn(node, id, before) },
		RestartLost:    func(rec job.Record, lost string, fenced bool) { a.checkpoints.RestartLost(rec, lost, fenced) },
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
		DropCheckpoint: func(node, id string, before time.Time) { a.checkpoints.DropOn(node, id, before) }, Leases: a.news})
	a.in = inbound.New(inbound.Config{Self: a.cfg.NodeID, ImageDir: a.imageDir, Rank: rankMigration, Jobs: a.jobs,
		Moves: a.migr, Store: a.store, Keeper: a.keeper, Members: a.members, Peers: a.peers, Pages: a.pages,
		Rounds: a.rounds, Procs: a.procs, Ckpt: a.ckpt, Log: a.log, Stop: a.stop, WG: &a.wg,
		Draining: func(node string) bool { return a.drain.Of(node) }, CPUHere: func(id string, pid int) float64 { return a.sched.CPUHere(id, pid) }, Event: a.event,
		JobMem: a.parts.JobMemory, Admitted: a.rounds.AdmittedMemMB, Sender: a.parts.Transport.Sender})
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
	a.sched = scheduler.New(scheduler.Config{Node: a.cfg.NodeID, Capacity: a.capacity, JobMemMB: float64(a.parts.JobMemory) / (1 << 20), Log: a.log,
		Rounds: a.rounds, Members: a.members, Jobs: a.jobs, Peers: a.peers, Drain: a.drain, Store: a.store,
		Procs: a.procs, Prober: a.prober, Event: a.event,
		Migrate: func(mv sched.Move) (api.Migration, error) {
			return a.out.MigrateOut(peer.MigrateOutRequest{ID: mv.Job, To: mv.To, Why: mv.Why, Lazy: mv.Lazy})
		},
		Stop: a.stop, Group: &a.wg, StateDir: a.cfg.StateDir, RecordBytes: a.cfg.RecordDecisionsBytes})
	a.gossip = gossip.New(gossip.Config{Node: a.cfg.NodeID, BindAddr: a.cfg.BindAddr, Advertise: a.adv,
		GossipPort: a.cfg.GossipPort, PeerPort: a.cfg.PeerPort, Capacity: a.capacity, UserNS: a.parts.UserNS, LazyUserNS: a.parts.LazyUserNS, Host: a.parts.Host, Join: a.cfg.Join, FenceKill: a.cfg.Fence.Kill, Slurm: a.cfg.Slurm.NodeName(a.cfg.NodeID),
		Interval: a.cfg.Load.Interval, Key: a.parts.GossipKey, Transport: a.parts.Gossip, Log: a.log,
		Members: a.members, Rounds: a.rounds, Jobs: a.jobs, Sched: a.sched, Drain: a.drain, Prober: a.prober,
		Counters: &a.stats.Gossip,
		// memberlist's callbacks must not block: the sweep runs beside them.
		Left: func() {
			select {
			case a.memberLeft <- struct{}{}:
			default:
			}
		},
		Stop: a.stop, Group: &a.wg, MetaRank: rankMeta})
}

// newCheckpoints is the checkpoints' owner of a; the job table, its store
// and the peer client must be in place.
func newCheckpoints(a *Agent) *checkpoints.Checkpoints {
	return checkpoints.New(checkpoints.Config{
		Self: a.cfg.NodeID, Log: a.log, Jobs: a.jobs, Store: a.store, Keeper: a.keeper, Members: a.members, Peers: a.peers,
		Stall: peer.StallTimeout, CallTimeout: peer.MigrateTimeout, Sweep: a.cfg.Limits.CheckpointSweep, Stop: a.stop,
		Draining: func() bool { return a.drain.On() }, Admitted: a.rounds.AdmittedMemMB,
		Record: func(id string) (job.Record, error) { return a.control.Record(id) }, Fence: a.cfg.Fence, Started: func() time.Time { return a.started },
		CheckRun: func(uid uint32, argv, env []string) error { return a.launch.CheckRestart(uid, argv, env) }, Allocation: a.launch.Allocation,
		Event: a.event, Attained: func(l job.Local) float64 { return a.sched.Attained(l) }, StoreFor: a.parts.KeepOn,
		Save: func(id string, stop bool, why string, deliver func(keeper.File) (string, error)) (keeper.File, error) {
			return a.out.CheckpointRun(id, stop, why, deliver)
		},
		Restore: func(run *reopen.Run, start migrate.Restart) (migrate.InRecord, error) {
			return a.in.Restart(start.MID, run.File, run.Target(start.Home))
		},
		Post: func(addr, path string, size int64, write func(io.Writer) error, out any) (int64, bool, error) {
			return a.out.PostStream(addr, path, size, write, out)
		},
	})
}

// fanOut makes the same peer call to every live node, this one included,
// and returns the answers in node order (peer.FanOut).
func fanOut[T any](a *Agent, method, path string, in any) []T {
	return peer.FanOut[T](a.peers, a.log, a.members.Live(), method, path, in)
}
