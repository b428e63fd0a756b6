package agent

// The destination side of a migration: the driver that carries out what
// the destination machine (package migrate) decides. Each migration's
// machine is stepped under its own lock, by the handler of the request
// that brought the event (the check, the stream, a commit, an abort) or
// by its timer, and the actions run in that goroutine.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"time"

	"roam/internal/agent/jobtable"
	"roam/internal/agent/peer"
	"roam/internal/agent/reopen"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/lockorder"
	"roam/internal/migrate"
)

// newInMig is migration mid of job id coming to this node, its machine new.
func newInMig(mid, id string) *inMig {
	in := &inMig{m: &migrate.Dest{}, mid: mid, job: id}
	in.mu.Init(rankMigration, "a migration's (inMig.mu)")
	return in
}

// inMig is one migration coming to this node.
type inMig struct {
	mid    string          // set once, when it is made
	job    string          // set once, when it is made
	final  atomic.Bool     // the machine has ended
	mu     lockorder.Mutex // one step at a time; guards everything below
	m      *migrate.Dest
	hdr    migrate.Header
	body   *bufio.Reader // the stream, while its handler reads it
	spool  string
	images string
	stdin  *os.File // the writing end of a re-created stdin pipe
	lazy   <-chan struct{}
	ready  migrateReady
	// restored is when CRIU's restore ended (for SettleMS).
	restored time.Time
	// ph are the steps of the request being handled (the stream, a
	// commit), sent back with its answer.
	ph     phaseLog
	timer  *time.Timer
	halted bool // the ledger could not be written before the agent stopped
	// rst is a restart's run (migrate_restart.go); nil for a migration.
	rst *reopen.Run
}

// Job is the migration's job (moves.Arrival).
func (in *inMig) Job() string { return in.job }

// Ended says the migration's machine has ended (moves.Arrival).
func (in *inMig) Ended() bool { return in.final.Load() }

// migrateCheck answers a source's check: this node reaches the job's
// files, holds no copy of it, and (eager) has a page sink open for it.
func (a *Agent) migrateCheck(req migrateCheckRequest) error {
	if !migrate.ValidMID(req.MID) {
		return errkind.New(peer.ErrBadRequest, "migration id %q", req.MID)
	}
	if _, ok := migrate.JobHome(req.ID); !ok {
		return errkind.New(peer.ErrBadRequest, "job id %q", req.ID)
	}
	if req.Late {
		// The frozen job's files the first check did not list: checked
		// alike, for the restore to compare with.
		found, err := a.checkFiles(req.Owner, req.Files)
		if err != nil {
			return err
		}
		return a.migr.AddChecked(req.MID, req.ID, found)
	}
	if a.drain.On() {
		return errkind.New(peer.ErrUnavailable, "node %s is draining: it takes no job", a.cfg.NodeID)
	}
	found, err := a.checkFiles(req.Owner, req.Files)
	if err != nil {
		return err
	}
	if err := a.notHere(req.ID, req.MID); err != nil {
		return err
	}
	if _, known, err := a.store.In(req.MID); err != nil || known {
		return errkind.New(peer.ErrBadRequest, "migration %s is known on node %s already", req.MID, a.cfg.NodeID)
	}
	if err := a.migr.KeepChecked(req.MID, req.ID, found, time.Now()); err != nil {
		return err
	}
	if req.Lazy {
		return nil
	}
	in := newInMig(req.MID, req.ID)
	if err := a.migr.Arrive(req.MID, in); err != nil {
		return err
	}
	if err := a.openSink(req.MID); err != nil {
		a.migr.Ended(req.MID, in)
		a.migr.TakeChecked(req.MID, req.ID)
		return err
	}
	_, err = a.stepMig(in, migrate.Offer{MID: req.MID, Job: req.ID, From: req.From})
	return err
}

// notHere refuses a job that runs here or is already coming here (by
// another migration than mid).
func (a *Agent) notHere(id, mid string) error {
	switch here, coming := a.jobs.HereOrComing(id, mid, a.migr); {
	case here:
		return errkind.New(peer.ErrBadRequest, "job %s is already on node %s", id, a.cfg.NodeID)
	case coming:
		return errkind.New(peer.ErrBadRequest, "job %s is already arriving on node %s", id, a.cfg.NodeID)
	}
	return nil
}

// migrateIn takes a migration stream, restores the job stopped, and
// answers "ready"; the copy then waits for the source's commit.
func (a *Agent) migrateIn(r io.Reader) (migrateReady, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	hdr, err := migrate.ReadHeader(br)
	if err != nil {
		return migrateReady{}, errkind.New(peer.ErrBadRequest, "%v", err)
	}
	if err := a.notHere(hdr.ID, hdr.MID); err != nil {
		return migrateReady{}, err
	}
	raw, _ := json.Marshal(hdr)
	in, err := a.streamArrival(hdr)
	if err != nil {
		return migrateReady{}, err
	}
	in.mu.Lock()
	if st := in.m.State(); in.job != hdr.ID || (st != migrate.DstNew && st != migrate.DstSinkOpen) {
		in.mu.Unlock()
		return migrateReady{}, errkind.New(peer.ErrBadRequest, "migration %s on node %s: not waiting for a stream of job %s", hdr.MID, a.cfg.NodeID, hdr.ID)
	}
	in.hdr, in.body = hdr, br
	in.spool = a.procs.SpoolDir(hdr.ID)
	in.images = filepath.Join(a.imageDir, "in-"+hdr.MID)
	in.mu.Unlock()
	ph, err := a.stepMig(in, migrate.Stream{MID: hdr.MID, Job: hdr.ID, From: hdr.From, Lazy: hdr.Lazy, Streamed: hdr.Streamed, Header: raw})
	if err != nil {
		return migrateReady{}, err
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.ready.SettleMS = msSince(in.restored)
	in.ready.Phases = ph
	return in.ready, nil
}

// streamArrival is the coming migration a stream of hdr is of: the one
// its check listed, or (a lazy migration, unchecked) a new one of an id
// the ledger does not have. The ledger is asked again once the new one
// is listed: a migration of that id that ended in between had its
// record written before it was forgotten.
func (a *Agent) streamArrival(hdr migrate.Header) (*inMig, error) {
	if in, ok := a.migr.Arrival(hdr.MID); ok {
		return in, nil
	}
	if hdr.Streamed {
		return nil, errkind.New(peer.ErrBadRequest, "no page stream for migration %s on node %s", hdr.MID, a.cfg.NodeID)
	}
	known := func() bool { _, known, err := a.store.In(hdr.MID); return err != nil || known }
	if known() {
		return nil, errkind.New(peer.ErrBadRequest, "migration %s is known on node %s already", hdr.MID, a.cfg.NodeID)
	}
	in, fresh := a.migr.Adopt(hdr.MID, newInMig(hdr.MID, hdr.ID))
	if fresh && known() {
		a.migr.Ended(hdr.MID, in)
		return nil, errkind.New(peer.ErrBadRequest, "migration %s is known on node %s already", hdr.MID, a.cfg.NodeID)
	}
	return in, nil
}

// stepIn brings a commit or an abort to migration mid's machine; a
// migration this node no longer holds in memory is rebuilt from the ledger.
func (a *Agent) stepIn(mid string, ev migrate.DestEvent) ([]api.Phase, error) {
	if !migrate.ValidMID(mid) {
		return nil, errkind.New(peer.ErrBadRequest, "migration id %q", mid)
	}
	in, ok := a.migr.Arrival(mid)
	if !ok {
		r, found, err := a.store.In(mid)
		if err != nil {
			return nil, err
		}
		if !found {
			if _, abort := ev.(migrate.AbortMsg); abort {
				a.migr.DropSink(mid)
				return nil, nil
			}
			return nil, errkind.New(peer.ErrNotFound, "no migration %s on node %s", mid, a.cfg.NodeID)
		}
		in = a.adoptRecord(r, migrate.Rebuild(r))
	}
	return a.stepMig(in, ev)
}

// adoptRecord makes an inMig of machine m for a ledger record and lists
// it as coming (a listed one of that id is returned instead), unless m
// ended: a late abort of a failed move, listed, would have a new move of
// its job refused as arriving.
func (a *Agent) adoptRecord(r migrate.InRecord, m *migrate.Dest) *inMig {
	in := newInMig(r.MID, r.Job)
	in.m, in.spool, in.images = m, a.procs.SpoolDir(r.Job), filepath.Join(a.imageDir, "in-"+r.MID)
	_ = json.Unmarshal(r.Header, &in.hdr)
	if r.Restart {
		// Its header is the file's, the home's consent in the record.
		var err error
		if in.rst, err = reopen.Recovered(a.keeper, r); err != nil && !m.Final() {
			a.log.Error("restart", "mid", r.MID, "job", r.Job, "err", err)
		}
		in.hdr, in.images = in.rst.Header(), filepath.Join(a.imageDir, "restart-"+r.MID)
	}
	if in.final.Store(m.Final()); m.Final() {
		return in
	}
	in, _ = a.migr.Adopt(r.MID, in)
	return in
}

// stepMig feeds ev to the machine and carries out what it decides; it
// returns the steps it carried out (the job is stopped during each: a
// migration's events come while it is) and the reply for the request that
// brought ev (nil when none was asked for).
func (a *Agent) stepMig(in *inMig, ev migrate.DestEvent) ([]api.Phase, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.ph = phaseLog{Side: api.SideDest, Frozen: true}
	err := a.carryOutIn(in, in.m.Step(time.Now(), ev))
	return in.ph.List, err
}

// carryOutIn carries out acts, then steps the machine with each event they
// answer and carries out its actions in turn, until none is left. in.mu is
// held.
func (a *Agent) carryOutIn(in *inMig, acts []migrate.DestAction) error {
	var reply error
	var q []migrate.DestEvent
	for {
		for _, act := range acts {
			if in.halted {
				return errkind.New(peer.ErrUnavailable, "node %s is stopping", a.cfg.NodeID)
			}
			if rep, ok := act.(migrate.Reply); ok {
				reply = rep.Err
				continue
			}
			if next := a.doIn(in, act); next != nil {
				if in.rst != nil {
					in.rst.NoteFailure(next)
				}
				q = append(q, next)
			}
		}
		if len(q) == 0 {
			break
		}
		acts, q = in.m.Step(time.Now(), q[0]), q[1:]
	}
	if in.m.Final() {
		in.final.Store(true)
		a.migr.Ended(in.mid, in)
		if a.migr.PruneDue(time.Now(), pruneEvery) {
			go pruneLedger(a.store)
		}
	}
	switch {
	case errors.Is(reply, migrate.ErrNotReady):
		reply = errkind.New(peer.ErrNotFound, "migration %s on node %s: %v", in.mid, a.cfg.NodeID, reply)
	case errors.Is(reply, migrate.ErrDestAborted), errors.Is(reply, migrate.ErrDestCommited):
		reply = errkind.New(peer.ErrBadRequest, "migration %s on node %s: %v", in.mid, a.cfg.NodeID, reply)
	}
	return reply
}

// doIn carries out one action and returns the event that answers it.
func (a *Agent) doIn(in *inMig, act migrate.DestAction) migrate.DestEvent {
	r := in.m.Record()
	t := time.Now()
	switch act := act.(type) {
	case migrate.PersistIn:
		if !a.persist(r.MID, func() error { return a.store.PutIn(act.Record) }) {
			in.halted = true
		}
		in.ph.Add("persist", t)
	case migrate.Receive:
		err := a.receive(in)
		in.ph.Add("receive", t)
		return migrate.Received{Err: err}
	case migrate.Restore:
		pid, err := a.restoreIn(in)
		if err != nil {
			return migrate.Restored{Err: err}
		}
		return migrate.Restored{PID: pid, Tix: a.procs.StartTicks(pid)}
	case migrate.Adopt:
		a.adoptIn(in, r)
		in.ph.Add("adopt", t)
	case migrate.Resume:
		alive := a.procs.Alive(r.PID, r.Tix)
		if alive {
			a.ckpt.Thaw(r.PID, in.hdr.Stopped)
		}
		in.ph.Add("resume", t)
		in.ph.Frozen = false
		// What the job need not wait for, once it runs: its CPU group
		// (it ran in the CPU controller's root since its restore), the
		// removal of its images.
		if alive {
			t = time.Now()
			if err := a.ckpt.Settle(r.Job, r.PID); err != nil {
				a.settleLater(r.Job, r.PID, r.Tix, err)
			}
			in.ph.Add("cpu cgroup", t)
		}
		in.removeImages(true)
		if in.rst != nil {
			os.Remove(in.rst.File.Path) // the run has ended: a restart needs it no more
		}
		a.jobs.KickPush()
	case migrate.Discard:
		a.discardIn(in, r)
		in.ph.Add("discard", t)
	case migrate.Ask:
		return a.ask(r)
	case migrate.Verify:
		return migrate.Verified{Err: in.rst.Verify()}
	case migrate.AskConsent:
		ans := in.rst.AskConsent(a.peers, a.cfg.NodeID, r)
		in.ph.Add("consent", t)
		return ans
	case migrate.CommitAtHome:
		return reopen.CommitAtHome(a.peers, r)
	case migrate.TellHome:
		return in.rst.TellHome(a.peers, r)
	case migrate.Wake:
		a.wakeIn(in, act.At)
	default:
		a.log.Error("migration: unknown destination action", "action", fmt.Sprintf("%T", act))
	}
	return nil
}

// adoptIn makes the restored copy a job of this node (idempotent).
func (a *Agent) adoptIn(in *inMig, r migrate.InRecord) {
	hdr := in.hdr
	l := job.Local{ID: hdr.ID, Home: hdr.Home, HomeAddr: hdr.HomeAddr, UID: hdr.UID, GID: hdr.GID, Groups: hdr.Groups, PID: r.PID, StartTix: r.Tix, Dir: in.spool,
		Started: hdr.Started, Hold: hdr.Hold, Moves: hdr.Moves + 1, LastMoved: r.EndedAt, Inc: hdr.Inc, CheckpointEvery: hdr.CheckpointEvery,
		CPUBefore: hdr.CPUBefore, CPUBase: a.sched.CPUHere(r.Job, r.PID)}
	ackOut, ackErr := hdr.AckOut, hdr.AckErr
	if in.rst != nil && in.rst.File.Path == "" {
		// A restart's file is gone: never a job with a header it lacks.
		a.log.Error("restart: no file to adopt the restored copy from; it is killed", "mid", r.MID, "job", r.Job)
		a.procs.Kill(r.PID, r.Tix, 5*time.Second)
		return
	} else if in.rst != nil {
		// A restart: the job as its home consented, its output acked by
		// none yet.
		g := in.rst.Grant
		l.ID, l.Home, l.HomeAddr, l.Moves, l.Inc, ackOut, ackErr = r.Job, g.Home, g.HomeAddr, g.Moves, g.Inc, -1, -1
	}
	a.jobs.Adopt(&jobtable.Local{Rec: l, Stdin: in.stdin, AckOut: ackOut, AckErr: ackErr, ArrivedAt: time.Now()}, a.migr)
	in.stdin = nil
	a.rounds.Arrived(l.ID)
	// Durable before the job runs: an agent that restarts finds the job
	// (and, if it has ended meanwhile, its status) in its table.
	if err := a.store.PutLocals(l); err != nil {
		a.log.Error("job table", "err", err)
	}
}

// discardIn ends whatever this node holds of a migration that did not
// commit: its sink, its restored copy, its images and spool (idempotent).
func (a *Agent) discardIn(in *inMig, r migrate.InRecord) {
	a.migr.DropSink(r.MID)
	a.migr.TakeChecked(r.MID, r.Job)
	if r.Job != "" {
		a.rounds.Arrived(r.Job)
	}
	if r.PID > 0 {
		a.procs.Kill(r.PID, r.Tix, 5*time.Second)
	}
	if in.stdin != nil {
		in.stdin.Close()
		in.stdin = nil
	}
	in.removeImages(false)
	if r.Restart {
		os.Remove(r.File)
	}
	if here, _ := a.jobs.HereOrComing(r.Job, r.MID, a.migr); r.Job == "" || here {
		return
	}
	// A copy restored by an agent that died before it could record its
	// pid: any stopped roam-init of this job that is not a local job.
	for _, pid := range a.ckpt.StoppedCopies(r.Job, in.spool) {
		a.procs.Kill(pid, a.procs.StartTicks(pid), 5*time.Second)
	}
	if in.spool != "" {
		os.RemoveAll(in.spool)
	}
}

// wakeIn steps the machine with a Tick at t.
func (a *Agent) wakeIn(in *inMig, t time.Time) {
	if in.timer != nil {
		in.timer.Stop()
	}
	in.timer = time.AfterFunc(time.Until(t), func() {
		select {
		case <-a.stop:
			return
		default:
		}
		if s := a.migr.Sink(in.mid); s != nil && s.Busy() {
			// A dump is still writing its pages: the machine's SinkWait
			// waits another SinkWait instead of ending the migration
			// under the dump. A sink no dump connected to, or whose
			// pages no stream claimed, ends when the timer finds it idle.
			go func() {
				in.mu.Lock()
				defer in.mu.Unlock()
				a.wakeIn(in, time.Now().Add(migrate.SinkWait))
			}()
			return
		}
		_, _ = a.stepMig(in, migrate.Tick{})
	})
}
