package outbound

// The source's driver: one migration leaving this node, carrying out
// what its machine (migrate.Source) decides, on CRIU and the peer port.
// A checkpoint's actions are in checkpoint.go.

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"roam/internal/procfs"
	"strings"
	"time"

	"roam/internal/agent/drive"
	"roam/internal/agent/jobtable"
	"roam/internal/agent/pages"
	"roam/internal/agent/peer"
	"roam/internal/agent/phases"
	"roam/internal/agent/relay"
	"roam/internal/api"
	"roam/internal/asuser"
	"roam/internal/ckpt"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/migrate"
)

// outMig is one migration leaving this node.
type outMig struct {
	d   *Driver
	m   *migrate.Source
	req peer.MigrateOutRequest
	lj  *jobtable.Local // nil when recovered after a restart
	ck  *ckptRun        // a checkpoint's (checkpoint.go), nil for a migration
	// what the driver learned on the way
	addr  string
	files []migrate.OpenFile
	// stopped are the job's processes stopped before it was frozen (pids
	// in its namespace): a thaw or the destination leaves them stopped.
	stopped []int
	mounts  []string
	dir     string // the images directory
	lazy    *pages.LazyDump
	mig     api.Migration
	ph      phases.Log // where the time went, the destination's steps included
	start   time.Time
	frozen  time.Time // when the dump began
	resumed time.Time // when the destination answered the commit
	wakeAt  time.Time
	left    bool
	// leased is the job as its header was written, when its fence holds
	// a lease on it (job.Local.Checkpointed): the commit says how old
	// that lease is then (commitQuery).
	leased *job.Local
	halted bool   // the ledger could not be written before the agent stopped
	spool  string // the job's spool here, removed once it left
	// done gets the migration's result once (Finish).
	done chan error
}

// MigrateOut is peer.MigrateOut, and a move of the policies: it moves a
// job running here to req.To, and tells its home node how it went. The
// returned migration has OK false, and err says why, when it failed; the
// job then still runs here.
func (d *Driver) MigrateOut(req peer.MigrateOutRequest) (api.Migration, error) {
	lj, err := d.claim(req.ID)
	if err != nil {
		return api.Migration{At: time.Now(), From: d.self, To: req.To, Lazy: req.Lazy, Why: req.Why}, err
	}
	rec := d.jobs.Moving(lj).Rec
	dest, known := d.members.Get(req.To)
	if err := restorableAt(req.To, procfs.OwnUserNS(rec.PID), rec.CPU, dest, known); err != nil {
		d.jobs.Release(req.ID, rec.PID, false)
		return api.Migration{At: time.Now(), From: d.self, To: req.To, Lazy: req.Lazy, Why: req.Why, Error: err.Error()}, err
	}
	eager := d.eagerInstead(&req, rec.PID)
	o := &outMig{d: d, m: &migrate.Source{}, req: req, lj: lj, start: time.Now(), done: make(chan error, 1), ph: phases.Log{Side: api.SideSource}}
	o.mig = api.Migration{At: o.start, From: d.self, To: req.To, Lazy: req.Lazy, Why: req.Why}
	if o.mig.Why == "" {
		o.mig.Why = "roam migrate"
	}
	if eager != "" {
		o.mig.Why += " (" + eager + ")"
	}
	mid := peer.NewMID()
	o.mig.MID = mid
	go o.run(migrate.Start{MID: mid, Job: req.ID, Home: rec.Home, To: req.To, Lazy: req.Lazy, Why: o.mig.Why,
		Seq: rec.Moves + 1, Inc: rec.Inc, PID: rec.PID, Tix: rec.StartTix})
	err = <-o.done
	m := o.mig
	if err == nil {
		m.OK = true
	} else {
		m.Error = err.Error()
	}
	return m, err
}

// claim marks a local job as migrating (jobtable.Table.Claim), so only
// one migration (or checkpoint) runs at a time and the push loop leaves
// it alone meanwhile. The claim is taken first and given back when the
// job turns out not to run: /proc and its status file are read without
// the job lock.
func (d *Driver) claim(id string) (*jobtable.Local, error) {
	lj, rec, busy := d.jobs.Claim(id)
	var err error
	switch {
	case busy:
		return nil, errkind.New(peer.ErrBadRequest, "job %s is already migrating", id)
	case lj == nil, !d.procs.Alive(rec.PID, rec.StartTix):
		err = errkind.New(peer.ErrNotFound, "job %s is not running on node %s", id, d.self)
	case d.leases != nil && d.leases.FenceHolds(id):
		err = errkind.New(peer.ErrUnavailable, "job %s is stopped on node %s until its home is reached (fence.lease)", id, d.self)
	default:
		if _, ended := job.ReadStatus(rec.Dir); ended {
			err = errkind.New(peer.ErrBadRequest, "job %s is ending", id)
		}
	}
	if err != nil {
		d.jobs.Release(id, rec.PID, false) // none when lj is nil: no job has pid 0
		return nil, err
	}
	return lj, nil
}

// run steps the machine from ev until nothing is left to do.
func (o *outMig) run(ev migrate.SourceEvent) { o.carryOut(o.m.Step(time.Now(), ev)) }

// carryOut carries out acts, then steps the machine with each event they
// answer and carries out its actions in turn (drive.Loop); a Wake is
// slept and answered with a Tick. It returns when nothing is left to do.
func (o *outMig) carryOut(acts []migrate.SourceAction) {
	defer o.end()
	step := func(ev migrate.SourceEvent) []migrate.SourceAction { return o.m.Step(time.Now(), ev) }
	do := func(act migrate.SourceAction) (migrate.SourceEvent, bool) {
		ev := o.do(act)
		return ev, ev != nil
	}
	halted := func() bool { return o.halted }
	for drive.Loop(acts, step, do, halted) && !o.wakeAt.IsZero() {
		select {
		case <-time.After(time.Until(o.wakeAt)):
		case <-o.d.stop:
			return
		}
		o.wakeAt = time.Time{}
		acts = step(migrate.Tick{})
	}
}

// end removes what the run leaves once its machine has nothing left to
// do, or the agent stops under it.
func (o *outMig) end() {
	if o.dir != "" {
		os.RemoveAll(o.dir)
	}
	if o.lazy != nil {
		o.lazy.End()
	}
	// Stopped before the machine said how it went: the caller is not
	// left waiting (the ledger finishes it at the next start).
	select {
	case o.done <- errkind.New(peer.ErrUnavailable, "node %s is stopping", o.d.self):
	default:
	}
	if o.d.moves.PruneDue(time.Now(), drive.PruneEvery) {
		drive.PruneLedger(o.d.store)
	}
}

// do carries out one action and returns the event that answers it, if any.
func (o *outMig) do(act migrate.SourceAction) migrate.SourceEvent {
	d, r := o.d, o.m.Record()
	if o.ck != nil {
		if ev, done := o.ckDo(act, r); done {
			return ev
		}
	}
	t := time.Now()
	switch act := act.(type) {
	case migrate.CheckLocal:
		pin, err := o.checkLocal(r)
		o.ph.Add("judge", t)
		return migrate.LocalChecked{Pin: pin, Err: err}
	case migrate.SendCheck:
		err := o.sendCheck(r)
		o.ph.Add("check", t)
		return migrate.CheckAnswer{Err: err}
	case migrate.Persist:
		if !drive.Persist(d.stop, d.log, r.MID, func() error { return d.store.PutOut(act.Record) }) {
			o.halted = true
		}
		o.ph.Add("persist", t)
	case migrate.Dump:
		return migrate.Dumped{Err: d.watchedDump(r.Job, func() error { return o.dump(r) })}
	case migrate.SendImages:
		return migrate.ReadyAnswer{Err: o.sendImages(r)}
	case migrate.Thaw:
		if o.lazy != nil {
			o.lazy.End() // CRIU holds the job until its page server ends
		}
		if d.procs.Alive(r.PID, r.Tix) {
			// The dump took the job out of its CPU group (ckpt's lift):
			// back in before it runs.
			if err := d.ckpt.Settle(r.Job, r.PID); err != nil {
				d.log.Warn("resuming a job after a failed migration", "job", r.Job, "err", err)
			}
			d.ckpt.Thaw(r.PID, o.stopped)
		}
		if o.ph.Frozen {
			// A failed migration froze the job until now.
			o.ph.Add("thaw", t)
			o.mig.FreezeMS, o.ph.Frozen = o.ph.FrozenMS(), false
		}
	case migrate.Kill:
		// Every process of our copy is killed and never runs again; the
		// kernel frees its memory while the destination resumes. A copy
		// that writes a file in a shared directory is waited for: its
		// exit closes the file, which sends what it wrote to a network
		// filesystem's server before the other copy reads it.
		o.leave(r)
		d.procs.Kill(r.PID, r.Tix, o.killWait())
		o.ph.Add("kill", t)
		return migrate.CopyGone{}
	case migrate.SendCommit:
		if r.Lazy && !o.left {
			// It runs there from now on. Our copy never runs again: it
			// is killed now, and goes once CRIU's page server, which
			// holds it, has served the last page (the Kill after
			// PagesDone).
			o.leave(r)
			d.procs.Kill(r.PID, r.Tix, 0)
			o.ph.Add("kill", t)
			t = time.Now()
		}
		theirs, err := o.commit(r)
		o.ph.AddCall("commit", t, theirs)
		if o.ph.Frozen {
			o.resumed = time.Now()
			o.mig.FreezeMS, o.ph.Frozen = o.ph.FrozenMS(), false
		}
		return migrate.CommitAnswer{Err: err}
	case migrate.SendAbort:
		if addr, err := d.members.PeerAddr(r.To); err == nil {
			go func() { _ = d.peers.CallAddr(addr, http.MethodPost, peer.MigrateAbort+"?mid="+r.MID, nil, nil) }()
		}
	case migrate.WaitPages:
		err := o.lazy.Wait()
		o.ph.Add("post-copy", t)
		if !o.resumed.IsZero() {
			o.mig.WindowMS = phases.Since(o.resumed)
		}
		o.mig.Bytes += o.lazy.Bytes()
		if err != nil {
			d.log.Error("lazy migration: pages not all delivered", "job", r.Job, "err", err)
		}
		return migrate.PagesDone{Err: err}
	case migrate.NoteHome:
		return migrate.HomeAnswer{Err: o.noteHome(r, act)}
	case migrate.Finish:
		o.finish(r, act.Err)
	case migrate.Wake:
		o.wakeAt = act.At
	default:
		d.log.Error("migration: unknown source action", "action", fmt.Sprintf("%T", act))
	}
	return nil
}

// checkLocal says why the job cannot leave this node (a pin), or why it
// cannot now (an error), or neither.
func (o *outMig) checkLocal(r migrate.Record) (string, error) {
	v, err := o.d.movable(r.PID, o.owner())
	if err != nil || v.Pin != "" {
		return v.Pin, err
	}
	o.files, o.stopped = v.Files, v.Stopped
	return "", nil
}

// movable judges a job running here for a move or a checkpoint: why it
// cannot leave this node (Verdict.Pin), or why it cannot now (an error: a
// process with other credentials may be a set-user-id child that ends),
// else the files the other node must reach. owner is nil when unknown.
func (d *Driver) movable(pid int, owner *asuser.Cred) (migrate.Verdict, error) {
	if uid, ok := d.procs.Owner(pid); ok && uid != 0 && !d.allUsers {
		return migrate.Verdict{Pin: fmt.Sprintf("runs as uid %d, and root on node %s lacks CAP_SYS_RESOURCE, so CRIU cannot read its rlimits", uid, d.self)}, nil
	}
	// Every process of the job, not only its first, before anything
	// freezes: a process that changed its credentials would fail the
	// dump (a uid CRIU cannot read the rlimits of) or the check of the
	// restored tasks, after the job was frozen for nothing.
	if owner != nil {
		if creds, err := d.ckpt.Creds(pid); err == nil {
			if err := migrate.CheckCreds(owner.UID, owner.GID, owner.Groups, creds); err != nil {
				return migrate.Verdict{}, errkind.New(peer.ErrBadRequest, "%v: a job whose processes changed their credentials is not moved while they run so", err)
			}
		}
	}
	return d.ckpt.Inspect(pid, d.members.IPs(), false), nil
}

// owner is the job's owner as its record says, or nil for a migration
// that has no job here (one recovered after a restart).
func (o *outMig) owner() *asuser.Cred {
	if o.lj == nil {
		return nil
	}
	rec := o.d.jobs.Moving(o.lj).Rec
	return &asuser.Cred{UID: rec.UID, GID: rec.GID, Groups: rec.Groups}
}

// sendCheck asks the destination whether it reaches the job's files and,
// for an eager migration, to open a page sink for it.
func (o *outMig) sendCheck(r migrate.Record) error {
	addr, err := o.d.members.PeerAddr(r.To)
	if err != nil {
		return err
	}
	o.addr = addr
	req := peer.MigrateCheckRequest{MID: r.MID, From: o.d.self, ID: r.Job, Files: o.files, Lazy: r.Lazy, Owner: o.owner()}
	if o.lj != nil {
		req.Req = o.d.jobs.Moving(o.lj).Rec.Req
	}
	return o.d.peers.CallAddr(addr, http.MethodPost, peer.MigrateCheck, req, nil)
}

// dump freezes and dumps the job; eager, its pages go to the sink.
func (o *outMig) dump(r migrate.Record) error {
	d := o.d
	t := time.Now()
	mounts, err := d.ckpt.Mounts(r.PID)
	if err != nil {
		return err
	}
	o.mounts = mounts
	o.dir = filepath.Join(d.imageDir, "out-"+r.MID)
	if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return err
	}
	o.ph.Add("prepare", t)
	o.frozen = time.Now()
	defer func() { o.mig.DumpMS = phases.Since(o.frozen) }()
	if r.Lazy {
		var times ckpt.Times
		o.lazy, times, err = d.pages.StartLazyDump(r.MID, r.PID, o.dir, mounts)
		o.ph.AddTimes(times, false)
		return err
	}
	o.mig.Bytes, err = d.pages.StreamedDump(o.addr, r.MID, r.PID, o.dir, mounts, &o.ph)
	return err
}

// sendImages streams the header and the archive and waits for "ready".
func (o *outMig) sendImages(r migrate.Record) error {
	d := o.d
	// The frozen tree is judged again: a lock taken since the check would
	// make the destination's restore wait (CRIU takes it again, blocking,
	// while this frozen copy holds it) until CRIU's time limit.
	t := time.Now()
	v := d.ckpt.Inspect(r.PID, d.members.IPs(), true)
	o.ph.Add("judge frozen", t)
	if v.Pin != "" {
		return errkind.New(peer.ErrBadRequest, "job %s, once frozen: %s", r.Job, v.Pin)
	}
	// Files the job opened between the check and the freeze: the
	// destination checks them too before the restore, which compares the
	// restored job's files with what its checks found.
	if late := migrate.LateFiles(o.files, v.Files); len(late) > 0 {
		t = time.Now()
		req := peer.MigrateCheckRequest{MID: r.MID, From: d.self, ID: r.Job, Files: late, Lazy: r.Lazy, Owner: o.owner(), Late: true}
		err := d.peers.CallAddr(o.addr, http.MethodPost, peer.MigrateCheck, req, nil)
		o.ph.Add("check late files", t)
		if err != nil {
			return err
		}
	}
	hdr := migrate.Header{MID: r.MID, From: d.self, ID: r.Job, Mounts: o.mounts, Lazy: r.Lazy, Streamed: !r.Lazy, Stopped: o.stopped}
	mj := d.jobs.Moving(o.lj)
	rec := mj.Rec
	hdr.Home, hdr.HomeAddr = rec.Home, rec.HomeAddr
	hdr.UID, hdr.GID, hdr.Groups = rec.UID, rec.GID, rec.Groups
	hdr.Started, hdr.Hold, hdr.Moves, hdr.LastMoved = rec.Started, rec.Hold, rec.Moves, rec.LastMoved
	hdr.AckOut, hdr.AckErr = mj.AckOut, mj.AckErr
	hdr.Inc, hdr.CheckpointEvery, hdr.Req = rec.Inc, rec.CheckpointEvery, rec.Req
	hdr.CPUBefore, hdr.PeakMB, hdr.CPU = d.attained(rec), max(rec.PeakBefore, d.procs.PeakMB(rec.ID)), rec.CPU
	hdr.LeaseAge, hdr.Checkpointed = d.leases.LeaseAge(rec), rec.Checkpointed
	if rec.Checkpointed {
		o.leased = &rec
	}
	hdr.Slurm, hdr.Within = rec.Slurm, rec.Within
	if o.req.Manual && hdr.Hold != migrate.HoldPin {
		hdr.Hold = migrate.HoldManual
	}
	if mj.Stdin {
		hdr.StdinKey = d.procs.StdinKey(r.PID)
	}
	sendStart := time.Now()
	n, ready, err := d.sendImages(o.addr, hdr, o.dir, rec.Dir)
	o.mig.Bytes += n
	o.mig.RestoreMS, o.mig.SettleMS = ready.RestoreMS, ready.SettleMS
	o.mig.CopyMS = phases.Since(sendStart) - ready.RestoreMS - ready.SettleMS
	o.ph.AddCall("stream", sendStart, phases.Theirs(ready.Phases, api.SideDest))
	return err
}

// killWait is how long to wait for our killed copy to be gone: until its
// files are closed when it writes one in a shared directory, else not at
// all.
func (o *outMig) killWait() time.Duration {
	for _, f := range o.files {
		if f.Same && strings.Contains(f.Access, "w") {
			return 30 * time.Second
		}
	}
	return 0
}

// leave forgets the job here once the decision to commit is persisted:
// a signal or stdin sent here by a stale record follows it there.
func (o *outMig) leave(r migrate.Record) {
	if o.left {
		return
	}
	o.left = true
	d := o.d
	if lj := d.jobs.Leave(r.Job, r.PID, r.To, d.moves); lj != nil {
		_ = d.store.DeleteLocal(r.Job)
		if lj.Stdin != nil {
			lj.Stdin.Close()
		}
		o.spool = lj.Rec.Dir
		d.kickLoad()
	}
}

func (o *outMig) noteHome(r migrate.Record, n migrate.NoteHome) error {
	m := o.mig
	m.MID, m.OK, m.Seq = r.MID, n.OK, r.Seq
	if m.From == "" { // recovered: what the ledger knows
		m.At, m.From, m.To, m.Lazy, m.Why = r.Started, o.d.self, r.To, r.Lazy, r.Why
	}
	if !n.OK {
		m.Error = n.Error
	}
	if m.TotalMS == 0 && !o.start.IsZero() {
		m.TotalMS = phases.Since(o.start)
	}
	m.Phases = o.ph.List
	o.mig = m
	// The copy's incarnation when the move began (the ledger's record
	// keeps it across a restart of this agent, when the job's local
	// record may be gone).
	inc := r.Inc
	note := relay.Note{ID: r.Job, Migration: &m, Inc: &inc}
	if n.OK {
		note.Node = r.To
		if o.req.Manual {
			note.Manual = &o.req.Manual
		}
	}
	if reason, pinned := migrate.PinReason(o.m.Err()); !n.OK && pinned {
		note.PinReason = reason
	}
	return o.d.noteHome(r.Home, note)
}

// finish answers whoever asked for the migration, and lets the job go
// back to the push loop and the policies when it stays here.
func (o *outMig) finish(r migrate.Record, err error) {
	d := o.d
	m := o.mig
	d.metrics.Observe(m)
	d.log.Info("migration", "job", r.Job, "to", r.To, "ok", err == nil, "bytes", m.Bytes,
		"freeze_ms", m.FreezeMS, "total_ms", m.TotalMS, "err", err)
	d.jobs.Release(r.Job, r.PID, false)
	if err == nil && o.spool != "" {
		os.RemoveAll(o.spool)
	}
	d.jobs.KickPush()
	select {
	case o.done <- err:
	default:
	}
}
