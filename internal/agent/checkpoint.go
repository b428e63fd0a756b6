package agent

// The wiring of package checkpoints (`roam checkpoint`, periodic
// checkpoints, `roam restart`, a home's restarts of its lost jobs): what
// the owner needs of the concerns still in this package, as closures over
// the agent.

import (
	"io"
	"roam/internal/agent/checkpoints"
	"roam/internal/agent/keeper"
	"roam/internal/agent/reopen"
	"roam/internal/job"
	"roam/internal/migrate"
)

// newCheckpoints is the checkpoints' owner of a; the job table, its store
// and the peer client must be in place.
func newCheckpoints(a *Agent) *checkpoints.Checkpoints {
	return checkpoints.New(checkpoints.Config{
		Self: a.cfg.NodeID, Log: a.log, Jobs: a.jobs, Store: a.store, Keeper: a.keeper, Members: a.members, Peers: a.peers,
		Stall: stallTimeout, CallTimeout: migrateTimeout,
		Draining: func() bool { return a.drain.On() },
		Record:   func(id string) (job.Record, error) { return a.control.Record(id) },
		Event:    a.event,
		Save: func(id string, stop bool, why string, deliver func(keeper.File) (string, error)) (keeper.File, error) {
			return a.out.CheckpointRun(id, stop, why, deliver)
		},
		Restore: func(run *reopen.Run, start migrate.Restart) (migrate.InRecord, error) {
			return a.in.Restart(start.MID, run.File, reopen.Target{Home: start.Home, Lost: run.Lost, Why: run.Why})
		},
		Post: func(addr, path string, size int64, write func(io.Writer) error, out any) (int64, bool, error) {
			return a.out.PostStream(addr, path, size, write, out)
		},
	})
}
