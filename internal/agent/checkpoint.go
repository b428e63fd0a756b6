package agent

// The wiring of package checkpoints (`roam checkpoint`, periodic
// checkpoints, `roam restart`, a home's restarts of its lost jobs): what
// the owner needs of the concerns still in this package, as closures over
// the agent.

import (
	"path/filepath"

	"roam/internal/agent/checkpoints"
	"roam/internal/agent/keeper"
	"roam/internal/agent/reopen"
	"roam/internal/migrate"
)

// savedCkpt is a checkpoint file the source driver wrote (ckpt_source.go),
// root's.
type savedCkpt struct {
	path string
	size int64
	meta migrate.CheckpointMeta
	hdr  migrate.Header
}

// file is s as package checkpoints gets it.
func (s savedCkpt) file() keeper.File {
	return keeper.File{Path: s.path, Size: s.size, Meta: s.meta, Hdr: s.hdr}
}

// newCheckpoints is the checkpoints' owner of a; the job table, its store
// and the peer client must be in place.
func newCheckpoints(a *Agent) *checkpoints.Checkpoints {
	return checkpoints.New(checkpoints.Config{
		Self: a.cfg.NodeID, Log: a.log, Jobs: a.jobs, Store: a.store, Keeper: a.keeper, Members: a.members, Peers: a.peers,
		Stall: stallTimeout, CallTimeout: migrateTimeout,
		Draining: a.draining.Load,
		Record:   a.control.Record,
		Event:    a.event,
		Save: func(id string, stop bool, why string, deliver func(keeper.File) (string, error)) (keeper.File, error) {
			s, err := a.checkpointRun(id, stop, why, func(s savedCkpt) (string, error) { return deliver(s.file()) })
			return s.file(), err
		},
		Restore: func(run *reopen.Run, start migrate.Restart) (migrate.InRecord, error) {
			in := newInMig(start.MID, start.Job)
			in.rst = run
			in.hdr, in.images = run.Header(), filepath.Join(a.imageDir, "restart-"+start.MID)
			a.migr.Adopt(start.MID, in)
			_, err := a.stepMig(in, start)
			in.mu.Lock()
			defer in.mu.Unlock()
			return in.m.Record(), err
		},
		Post: a.postStream,
	})
}
