package inbound

// The destination's driver: the requests that bring a coming migration's
// events, and the actions its machine (migrate.Dest) decides.

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"roam/internal/agent/drive"
	"roam/internal/agent/httpx"
	"roam/internal/agent/jobtable"
	"roam/internal/agent/peer"
	"roam/internal/agent/phases"
	"roam/internal/agent/reopen"
	"roam/internal/agent/stall"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/migrate"
	"roam/internal/sched"
)

// Check is peer.MigrateCheck, a source's check: this node reaches the
// job's files, holds no copy of it, and (eager) has a page sink open for
// it.
func (d *Driver) Check(req peer.MigrateCheckRequest) error {
	if !migrate.ValidMID(req.MID) {
		return errkind.New(peer.ErrBadRequest, "migration id %q", req.MID)
	}
	if _, ok := migrate.JobHome(req.ID); !ok {
		return errkind.New(peer.ErrBadRequest, "job id %q", req.ID)
	}
	if req.Late {
		return d.lateCheck(req)
	}
	if d.draining(d.self) {
		return errkind.New(peer.ErrUnavailable, "node %s is draining: it takes no job", d.self)
	}
	if err := req.Req.Check(); err != nil {
		return errkind.New(peer.ErrBadRequest, "%v", err)
	}
	held := float64(d.jobs.MemHeld(req.ID))/(1<<20) + d.admitted(req.ID)
	if err := sched.MemFits(d.self, float64(d.jobMem)/(1<<20), held, req.Req); err != nil {
		return errkind.New(peer.ErrUnavailable, "job %s: %v", req.ID, err)
	}
	found, k, err := d.CheckFiles(req.Owner, req.Files)
	if err != nil {
		return err
	}
	if err := d.NotHere(req.ID, req.MID); err != nil {
		k.close()
		return err
	}
	if _, known, err := d.store.In(req.MID); err != nil || known {
		k.close()
		return errkind.New(peer.ErrBadRequest, "migration %s is known on node %s already", req.MID, d.self)
	}
	if err := d.moves.KeepChecked(req.MID, req.ID, found, time.Now()); err != nil {
		k.close()
		return err
	}
	if err := d.held.keep(req.MID, req.ID, k); err != nil {
		d.moves.TakeChecked(req.MID, req.ID)
		return err
	}
	if req.Lazy {
		return nil
	}
	in := d.newMigration(req.MID, req.ID)
	if err := d.moves.Arrive(req.MID, in); err != nil {
		d.moves.TakeChecked(req.MID, req.ID)
		d.held.drop(req.MID)
		return err
	}
	if err := d.pages.OpenSink(req.MID); err != nil {
		d.moves.Ended(req.MID, in)
		d.moves.TakeChecked(req.MID, req.ID)
		d.held.drop(req.MID)
		return err
	}
	_, err = d.step(in, migrate.Offer{MID: req.MID, Job: req.ID, From: req.From})
	return err
}

// lateCheck is a late check: the frozen job's files the first check did
// not list, checked alike, for the restore to compare with and hand CRIU.
func (d *Driver) lateCheck(req peer.MigrateCheckRequest) error {
	found, k, err := d.CheckFiles(req.Owner, req.Files)
	if err != nil {
		return err
	}
	if err := d.moves.AddChecked(req.MID, req.ID, found); err != nil {
		k.close()
		return err
	}
	return d.held.add(req.MID, req.ID, k)
}

// NotHere refuses a job that runs here or is already coming here (by
// another migration than mid).
func (d *Driver) NotHere(id, mid string) error {
	switch here, coming := d.jobs.HereOrComing(id, mid, d.moves); {
	case here:
		return errkind.New(peer.ErrBadRequest, "job %s is already on node %s", id, d.self)
	case coming:
		return errkind.New(peer.ErrBadRequest, "job %s is already arriving on node %s", id, d.self)
	}
	return nil
}

// ServeStream is peer.MigrateStream: a migration's stream. A read that
// makes no progress for peer.StallTimeout ends the transfer (the source's
// link went down, or it died).
func (d *Driver) ServeStream(w http.ResponseWriter, r *http.Request) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{}) // the peer server's body deadline (the agent's bodyWithin): the watch bounds it
	wd := stall.Watch(peer.StallTimeout, func() { _ = rc.SetReadDeadline(time.Unix(1, 0)) })
	ready, err := d.migrateIn(stall.NewReader(r.Body, wd), d.sender(r))
	wd.Stop()
	if err != nil {
		httpx.WriteError(w, err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, ready)
}

// migrateIn takes a migration stream from node sender, restores the job
// stopped, and answers "ready"; the copy then waits for the source's
// commit. The stream's header must name sender as its source: the
// destination fetches a lazy migration's pages from the node it names,
// and tells the home that the job came from there.
func (d *Driver) migrateIn(r io.Reader, sender string) (peer.MigrateReady, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	hdr, err := migrate.ReadHeader(br)
	if err != nil {
		return peer.MigrateReady{}, errkind.New(peer.ErrBadRequest, "%v", err)
	}
	if hdr.From != sender {
		return peer.MigrateReady{}, errkind.New(peer.ErrPermission, "migration %s: its header names node %q as its source, and node %q sent it", hdr.MID, hdr.From, sender)
	}
	if err := d.NotHere(hdr.ID, hdr.MID); err != nil {
		return peer.MigrateReady{}, err
	}
	// Room for its memory, held from here until it is a local job
	// (adoptIn) or nothing of it is (discardIn).
	if err := d.jobs.ReserveMem(d.self, hdr.ID, hdr.Req, d.jobMem, d.admitted(hdr.ID)); err != nil {
		return peer.MigrateReady{}, errkind.New(peer.ErrUnavailable, "job %s: %v", hdr.ID, err)
	}
	raw, _ := json.Marshal(hdr)
	in, err := d.streamArrival(hdr)
	if err != nil {
		d.jobs.Unreserve(hdr.ID)
		return peer.MigrateReady{}, err
	}
	in.mu.Lock()
	if st := in.m.State(); in.job != hdr.ID || (st != migrate.DstNew && st != migrate.DstSinkOpen) {
		in.mu.Unlock()
		return peer.MigrateReady{}, errkind.New(peer.ErrBadRequest, "migration %s on node %s: not waiting for a stream of job %s", hdr.MID, d.self, hdr.ID)
	}
	in.hdr, in.body = hdr, br
	in.spool = d.procs.SpoolDir(hdr.ID)
	in.images = filepath.Join(d.imageDir, "in-"+hdr.MID)
	in.mu.Unlock()
	ph, err := d.step(in, migrate.Stream{MID: hdr.MID, Job: hdr.ID, From: hdr.From, Lazy: hdr.Lazy, Streamed: hdr.Streamed, Header: raw})
	if err != nil {
		return peer.MigrateReady{}, err
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	in.ready.SettleMS = phases.Since(in.restored)
	in.ready.Phases = ph
	return in.ready, nil
}

// streamArrival is the coming migration a stream of hdr is of: the one
// its check listed, or (a lazy migration, unchecked) a new one of an id
// the ledger does not have. The ledger is asked again once the new one
// is listed: a migration of that id that ended in between had its
// record written before it was forgotten.
func (d *Driver) streamArrival(hdr migrate.Header) (*Migration, error) {
	if in, ok := d.moves.Arrival(hdr.MID); ok {
		return in, nil
	}
	if hdr.Streamed {
		return nil, errkind.New(peer.ErrBadRequest, "no page stream for migration %s on node %s", hdr.MID, d.self)
	}
	known := func() bool { _, known, err := d.store.In(hdr.MID); return err != nil || known }
	if known() {
		return nil, errkind.New(peer.ErrBadRequest, "migration %s is known on node %s already", hdr.MID, d.self)
	}
	in, fresh := d.moves.Adopt(hdr.MID, d.newMigration(hdr.MID, hdr.ID))
	if fresh && known() {
		d.moves.Ended(hdr.MID, in)
		return nil, errkind.New(peer.ErrBadRequest, "migration %s is known on node %s already", hdr.MID, d.self)
	}
	return in, nil
}

// AdoptRecord makes a Migration of machine m for a ledger record and
// lists it as coming (a listed one of that id is returned instead),
// unless m ended: a late abort of a failed move, listed, would have a new
// move of its job refused as arriving.
func (d *Driver) AdoptRecord(r migrate.InRecord, m *migrate.Dest) *Migration {
	in := d.newMigration(r.MID, r.Job)
	in.m, in.spool, in.images = m, d.procs.SpoolDir(r.Job), filepath.Join(d.imageDir, "in-"+r.MID)
	_ = json.Unmarshal(r.Header, &in.hdr)
	if r.Restart {
		// Its header is the file's, the home's consent in the record.
		var err error
		if in.rst, err = reopen.Recovered(d.keeper, r); err != nil && !m.Final() {
			d.log.Error("restart", "mid", r.MID, "job", r.Job, "err", err)
		}
		in.hdr, in.images = in.rst.Header(), filepath.Join(d.imageDir, "restart-"+r.MID)
	}
	if in.final.Store(m.Final()); m.Final() {
		return in
	}
	in, _ = d.moves.Adopt(r.MID, in)
	return in
}

// step feeds ev to the machine and carries out what it decides; it
// returns the steps it carried out (the job is stopped during each: a
// migration's events come while it is) and the reply for the request that
// brought ev (nil when none was asked for).
func (d *Driver) step(in *Migration, ev migrate.DestEvent) ([]api.Phase, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.ph = phases.Log{Side: api.SideDest, Frozen: true}
	err := d.carryOut(in, in.m.Step(time.Now(), ev))
	return in.ph.List, err
}

// carryOut carries out acts, then steps the machine with each event they
// answer and carries out its actions in turn, until none is left
// (drive.Loop); it returns the reply the machine gave the request. in.mu
// is held.
func (d *Driver) carryOut(in *Migration, acts []migrate.DestAction) error {
	var reply error
	step := func(ev migrate.DestEvent) []migrate.DestAction { return in.m.Step(time.Now(), ev) }
	do := func(act migrate.DestAction) (migrate.DestEvent, bool) {
		if rep, ok := act.(migrate.Reply); ok {
			reply = rep.Err
			return nil, false
		}
		next := d.doIn(in, act)
		if next != nil && in.rst != nil {
			in.rst.NoteFailure(next)
		}
		return next, next != nil
	}
	if !drive.Loop(acts, step, do, func() bool { return in.halted }) {
		return errkind.New(peer.ErrUnavailable, "node %s is stopping", d.self)
	}
	if in.m.Final() {
		in.final.Store(true)
		d.moves.Ended(in.mid, in)
		if d.moves.PruneDue(time.Now(), drive.PruneEvery) {
			go drive.PruneLedger(d.store)
		}
	}
	switch {
	case errors.Is(reply, migrate.ErrNotReady):
		reply = errkind.New(peer.ErrNotFound, "migration %s on node %s: %v", in.mid, d.self, reply)
	case errors.Is(reply, migrate.ErrDestAborted), errors.Is(reply, migrate.ErrDestCommited):
		reply = errkind.New(peer.ErrBadRequest, "migration %s on node %s: %v", in.mid, d.self, reply)
	}
	return reply
}

// doIn carries out one action and returns the event that answers it.
func (d *Driver) doIn(in *Migration, act migrate.DestAction) migrate.DestEvent {
	r := in.m.Record()
	t := time.Now()
	switch act := act.(type) {
	case migrate.PersistIn:
		if !drive.Persist(d.stop, d.log, r.MID, func() error { return d.store.PutIn(act.Record) }) {
			in.halted = true
		}
		in.ph.Add("persist", t)
	case migrate.Receive:
		err := d.receive(in)
		in.ph.Add("receive", t)
		return migrate.Received{Err: err}
	case migrate.Restore:
		pid, err := d.restoreIn(in)
		if err != nil {
			return migrate.Restored{Err: err}
		}
		return migrate.Restored{PID: pid, Tix: d.procs.StartTicks(pid)}
	case migrate.Adopt:
		// Adopted already by a run of the agent that died before the
		// resume: the table keeps what it has of the job (its acks).
		if !d.jobs.HasLocal(r.Job, r.PID) {
			d.adoptIn(in, r)
		}
		in.ph.Add("adopt", t)
	case migrate.Resume:
		alive := d.procs.Alive(r.PID, r.Tix)
		if alive {
			d.ckpt.Thaw(r.PID, in.hdr.Stopped)
		}
		in.ph.Add("resume", t)
		in.ph.Frozen = false
		// What the job need not wait for, once it runs: its CPU group
		// (it ran in the CPU controller's root since its restore), the
		// removal of its images.
		if alive {
			t = time.Now()
			if err := d.ckpt.Settle(r.Job, r.PID); err != nil {
				d.settleLater(r.Job, r.PID, r.Tix, err)
			}
			in.ph.Add("cpu cgroup", t)
		}
		in.removeImages(true)
		if in.rst != nil {
			os.Remove(in.rst.File.Path) // the run has ended: a restart needs it no more
		}
		d.jobs.KickPush()
		return migrate.Resumed{}
	case migrate.Discard:
		d.discardIn(in, r)
		in.ph.Add("discard", t)
	case migrate.Ask:
		return d.ask(r)
	case migrate.Verify:
		return migrate.Verified{Err: in.rst.Verify()}
	case migrate.AskConsent:
		ans := in.rst.AskConsent(d.peers, d.self, r)
		in.ph.Add("consent", t)
		return ans
	case migrate.CommitAtHome:
		return reopen.CommitAtHome(d.peers, r)
	case migrate.TellHome:
		return in.rst.TellHome(d.peers, r)
	case migrate.Wake:
		d.wakeIn(in, act.At)
	default:
		d.log.Error("migration: unknown destination action", "action", fmt.Sprintf("%T", act))
	}
	return nil
}

// adoptIn makes the restored copy a job of this node (idempotent).
func (d *Driver) adoptIn(in *Migration, r migrate.InRecord) {
	hdr := in.hdr
	l := job.Local{ID: hdr.ID, Home: hdr.Home, HomeAddr: hdr.HomeAddr, UID: hdr.UID, GID: hdr.GID, Groups: hdr.Groups, PID: r.PID, StartTix: r.Tix, Dir: in.spool,
		Started: hdr.Started, Hold: hdr.Hold, Moves: hdr.Moves + 1, LastMoved: r.EndedAt, Inc: hdr.Inc, CheckpointEvery: hdr.CheckpointEvery, Req: hdr.Req,
		CPUBefore: hdr.CPUBefore, CPUBase: d.cpuHere(r.Job, r.PID), PeakBefore: hdr.PeakMB, CPU: hdr.CPU, Slurm: hdr.Slurm, Within: hdr.Within}
	l.Checkpointed = hdr.Checkpointed || in.rst != nil // a restart's file restarts it again
	if hdr.LeaseAge > 0 {
		l.LeaseCap = r.Started.Add(-hdr.LeaseAge) // its stream's start here, less the age as its header was written
		if in.leased.After(l.LeaseCap) {
			l.LeaseCap = in.leased // renewed on the source while it moved: the commit's age
		}
	}
	ackOut, ackErr := hdr.AckOut, hdr.AckErr
	if in.rst != nil && in.rst.File.Path == "" {
		// A restart's file is gone: never a job with a header it lacks.
		d.log.Error("restart: no file to adopt the restored copy from; it is killed", "mid", r.MID, "job", r.Job)
		d.procs.Kill(r.PID, r.Tix, 5*time.Second)
		return
	} else if in.rst != nil {
		// A restart: the job as its home consented, its output acked by
		// none yet.
		g := in.rst.Grant
		l.ID, l.Home, l.HomeAddr, l.Moves, l.Inc, ackOut, ackErr = r.Job, g.Home, g.HomeAddr, g.Moves, g.Inc, -1, -1
	}
	d.jobs.Adopt(&jobtable.Local{Rec: l, Stdin: in.stdin, AckOut: ackOut, AckErr: ackErr, ArrivedAt: time.Now()}, d.moves)
	in.stdin = nil
	d.rounds.Arrived(l.ID)
	// Durable before the job runs: an agent that restarts finds the job
	// (and, if it has ended meanwhile, its status) in its table.
	if err := d.store.PutLocals(l); err != nil {
		d.log.Error("job table", "err", err)
	}
}

// discardIn ends whatever this node holds of a migration that did not
// commit: its sink, its restored copy, its images and spool (idempotent).
func (d *Driver) discardIn(in *Migration, r migrate.InRecord) {
	d.moves.DropSink(r.MID)
	d.moves.TakeChecked(r.MID, r.Job)
	d.held.drop(r.MID)
	if r.Job != "" {
		d.rounds.Arrived(r.Job)
		// Its room, unless the job runs here or comes by another run.
		if here, coming := d.jobs.HereOrComing(r.Job, r.MID, d.moves); !here && !coming {
			d.jobs.Unreserve(r.Job)
		}
	}
	if r.PID > 0 {
		d.procs.Kill(r.PID, r.Tix, 5*time.Second)
	}
	if in.stdin != nil {
		in.stdin.Close()
		in.stdin = nil
	}
	in.removeImages(false)
	if r.Restart {
		os.Remove(r.File)
	}
	if here, _ := d.jobs.HereOrComing(r.Job, r.MID, d.moves); r.Job == "" || here {
		return
	}
	// A copy restored by an agent that died before it could record its
	// pid: any stopped roam-init of this job that is not a local job.
	for _, pid := range d.ckpt.StoppedCopies(r.Job, in.spool) {
		d.procs.Kill(pid, d.procs.StartTicks(pid), 5*time.Second)
	}
	if in.spool != "" {
		os.RemoveAll(in.spool)
	}
}

// wakeIn steps the machine with a Tick at t.
func (d *Driver) wakeIn(in *Migration, t time.Time) {
	if in.timer != nil {
		in.timer.Stop()
	}
	in.timer = time.AfterFunc(time.Until(t), func() {
		select {
		case <-d.stop:
			return
		default:
		}
		if s := d.moves.Sink(in.mid); s != nil && s.Busy() {
			// A dump is still writing its pages: the machine's SinkWait
			// waits another SinkWait instead of ending the migration
			// under the dump. A sink no dump connected to, or whose
			// pages no stream claimed, ends when the timer finds it idle.
			go func() {
				in.mu.Lock()
				defer in.mu.Unlock()
				d.wakeIn(in, time.Now().Add(migrate.SinkWait))
			}()
			return
		}
		_, _ = d.step(in, migrate.Tick{})
	})
}
