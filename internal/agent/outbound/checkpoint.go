package outbound

// A checkpoint is a run of the source machine whose destination is a
// sealed file (migrate/source_file.go): the driver of migrations
// (source.go) carries out a checkpoint's actions here. The job is
// frozen for CRIU's dump only, then runs on while its file is written; with
// roam checkpoint --stop it stays frozen until the file is delivered, and
// is killed once "committed" is persisted. Any failure before the delivery
// thaws it and removes the file: the file is whole and sealed, or absent.

import (
	"bufio"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"roam/internal/agent/keeper"
	"roam/internal/agent/peer"
	"roam/internal/agent/phases"
	"roam/internal/agent/relay"
	"roam/internal/agent/reopen"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/migrate"
)

// ckptRun is what a checkpoint's run holds besides a migration's.
type ckptRun struct {
	// deliver hands the sealed file to whoever keeps it and says on which
	// node ("" for its user); nil for a run recovered after a restart,
	// which never delivers.
	deliver  func(keeper.File) (storedOn string, err error)
	storedOn string
	rec      job.Local // the job's record when the run began
	cj       *migrate.CheckpointJob
	stdin    bool
	stopped  []int // its processes stopped before the freeze
	frozen   time.Time
	bind     migrate.Binding
	meta     migrate.CheckpointMeta
	hdr      migrate.Header
	files    []migrate.File
	size     int64
	path     string // the file, under its temporary name, then its final one
	// release ends the file's hold in its owner's budget of files in
	// flight (keeper.Hold), taken as it is written.
	release func()
}

// saved is the file as the agent hands it on.
func (c *ckptRun) saved() keeper.File {
	return keeper.File{Path: c.path, Size: c.size, Bind: c.bind, Meta: c.meta, Hdr: c.hdr}
}

// CheckpointRun saves job id, running here, into a sealed file that
// deliver hands on (it says on which node the file is kept, "" for one
// handed to its user), on the source machine; it returns once the
// machine has finished (the home told once), with what was saved. stop:
// the job is killed once its file is delivered (roam checkpoint --stop).
// deliver runs in the run's goroutine, and the file is removed after it
// returned nil.
func (d *Driver) CheckpointRun(id string, stop bool, why string, deliver func(keeper.File) (string, error)) (keeper.File, error) {
	lj, err := d.claim(id)
	if err != nil {
		return keeper.File{}, err
	}
	mj := d.jobs.Moving(lj)
	rec := mj.Rec
	ck := &ckptRun{deliver: deliver, rec: rec, stdin: mj.Stdin}
	o := &outMig{d: d, m: &migrate.Source{}, lj: lj, ck: ck, req: peer.MigrateOutRequest{ID: id, Why: why}, start: time.Now(),
		done: make(chan error, 1)}
	go o.run(migrate.Start{MID: peer.NewMID(), Job: id, Home: rec.Home, Target: migrate.TargetFile, Stop: stop, Why: why,
		Inc: rec.Inc, PID: rec.PID, Tix: rec.StartTix})
	err = <-o.done
	if reason, pinned := migrate.PinReason(err); pinned {
		err = errkind.New(peer.ErrPinned, "job %s cannot be checkpointed: %s", id, reason)
	}
	return ck.saved(), err
}

// ckDo carries out one action of a checkpoint, and says whether it was
// one a checkpoint does its own way (else do does it as for a migration).
func (o *outMig) ckDo(act migrate.SourceAction, r migrate.Record) (migrate.SourceEvent, bool) {
	d, ck := o.d, o.ck
	switch act := act.(type) {
	case migrate.CheckLocal:
		pin, err := o.ckCheck(r)
		return migrate.LocalChecked{Pin: pin, Err: err}, true
	case migrate.Dump:
		return migrate.Dumped{Err: d.watchedDump(r.Job, func() error { return o.ckDump(r) })}, true
	case migrate.Thaw:
		if d.procs.Alive(r.PID, r.Tix) {
			d.ckpt.Thaw(r.PID, ck.stopped)
		}
		ck.freezeEnds()
	case migrate.WriteFile:
		ck.freezeEnds()
		return migrate.Written{Err: o.ckWrite(r)}, true
	case migrate.SealFile:
		return migrate.Sealed{Err: o.ckSeal(r)}, true
	case migrate.Deliver:
		var err error
		ck.storedOn, err = ck.deliver(ck.saved())
		if err == nil {
			os.Remove(ck.path) // the keeper has it, or its user
		}
		return migrate.Delivered{Err: err}, true
	case migrate.Kill:
		why := reopen.StoppedToRestart
		if r.Why == job.EndPreempted {
			why = job.EndPreempted // its home makes it pending again
		}
		d.jobs.EndedHere(r.Job, why)
		d.procs.Kill(r.PID, r.Tix, 30*time.Second)
		return migrate.CopyGone{}, true
	case migrate.RemoveFile:
		if tmp, err := d.keeper.NewPath("ckpt", r.MID); err == nil {
			os.Remove(tmp)
		}
		os.Remove(d.keeper.SealedPath(r.MID))
		if o.dir != "" {
			os.RemoveAll(o.dir)
		}
	case migrate.NoteHome:
		var err error
		if !act.OK {
			err = errors.New(act.Error)
		}
		cp := checkpointNote(ck.saved(), d.self, ck.storedOn, err)
		inc := r.Inc
		return migrate.HomeAnswer{Err: d.noteHome(r.Home, relay.Note{ID: r.Job, Inc: &inc, Checkpoint: &cp})}, true
	case migrate.Finish:
		o.ckFinish(r, act.Err)
	default:
		return nil, false
	}
	return nil, true
}

// freezeEnds notes the job's freeze: to its first thaw, or (--stop) its file.
func (c *ckptRun) freezeEnds() {
	if c.meta.FreezeMS == 0 && !c.frozen.IsZero() {
		c.meta.FreezeMS = phases.Since(c.frozen)
	}
}

// ckCheck says why the job cannot be checkpointed (a pin), or why not now
// (an error): what its record at its home holds that this node does not
// is asked of its home once (it never changes).
func (o *outMig) ckCheck(r migrate.Record) (string, error) {
	d, ck := o.d, o.ck
	cj := d.jobs.CkptJob(r.Job)
	if cj == nil {
		var hr job.Record
		if err := d.peers.Call(r.Home, http.MethodGet, peer.Record+"?id="+url.QueryEscape(r.Job), nil, &hr); err != nil {
			return "", fmt.Errorf("its record at its home %s: %w", r.Home, err)
		}
		if hr.State == job.StateStarting {
			// Its home takes the job's start from this node's answer,
			// which the file must carry as its record will have it.
			return "", fmt.Errorf("its home %s has not yet heard that it started", r.Home)
		}
		cj = &migrate.CheckpointJob{User: hr.User, Argv: hr.Argv, Env: hr.Env, Cwd: hr.Cwd, Pin: hr.Pin, Group: hr.Group, Started: hr.Started, Req: hr.Req}
		d.jobs.SetCkptJob(r.Job, cj)
	}
	ck.cj = cj
	v, err := d.movable(r.PID, o.owner())
	if err != nil || v.Pin != "" {
		return v.Pin, err
	}
	ck.stopped = v.Stopped
	return "", nil
}

// ckDump freezes and dumps the job into the images directory, judges it
// again frozen, and makes the file's META and header. An error leaves the
// thaw to the machine.
func (o *outMig) ckDump(r migrate.Record) error {
	d, ck := o.d, o.ck
	mounts, err := d.ckpt.Mounts(r.PID)
	if err != nil {
		return err
	}
	o.dir = filepath.Join(d.imageDir, "ckpt-"+r.MID)
	if err := os.MkdirAll(o.dir, 0o700); err != nil {
		return err
	}
	ck.frozen = time.Now()
	if err := d.ckpt.Checkpoint(r.Job, r.PID, o.dir, mounts); err != nil {
		return fmt.Errorf("checkpoint of job %s: %w", r.Job, err)
	}
	// Judged again frozen, as a migration does: a lock taken since would
	// make the restore wait for it.
	fv := d.ckpt.Inspect(r.PID, d.members.IPs(), true)
	if fv.Pin != "" {
		return errkind.New(peer.ErrPinned, "job %s cannot be checkpointed, once frozen: %s", r.Job, fv.Pin)
	}
	// The file goes to the job's owner: every task in it, as frozen (a
	// set-id program started since the first look included), must run
	// as the owner and be dumpable, or the images would hold memory the
	// owner could not read.
	rec := ck.rec
	tasks, err := d.ckpt.Creds(r.PID)
	if err == nil {
		err = migrate.CheckCheckpointable(rec.UID, rec.GID, rec.Groups, r.PID, tasks)
	}
	if err != nil {
		return errkind.New(peer.ErrBadRequest, "job %s cannot be checkpointed, once frozen: %v", r.Job, err)
	}
	// The spool's sizes now are where the output goes on after a
	// restart; the files are read later, up to these sizes.
	if ck.files, err = streamFiles(o.dir, rec.Dir); err != nil {
		return err
	}
	ck.meta, ck.hdr = o.ckMeta(r, fv.Files, mounts)
	return nil
}

// ckMeta is the checkpoint file's META and header: the frozen job's files
// as the images have them (a restart checks these, and then the restored
// job holds exactly them), its spool's sizes, its record.
func (o *outMig) ckMeta(r migrate.Record, files []migrate.OpenFile, mounts []string) (migrate.CheckpointMeta, migrate.Header) {
	d, ck, rec := o.d, o.ck, o.ck.rec
	meta := migrate.CheckpointMeta{At: ck.frozen, Node: d.self, Files: files, Job: *ck.cj, CPU: rec.CPU}
	for _, f := range ck.files {
		switch f.Name {
		case migrate.DirSpool + "/stdout":
			meta.Out = f.Size
		case migrate.DirSpool + "/stderr":
			meta.Err = f.Size
		}
	}
	hdr := migrate.Header{MID: r.MID, From: d.self, ID: r.Job, Home: rec.Home, HomeAddr: rec.HomeAddr, Mounts: mounts,
		UID: rec.UID, GID: rec.GID, Groups: rec.Groups, Started: rec.Started, Hold: rec.Hold,
		Moves: rec.Moves, LastMoved: rec.LastMoved, Stopped: ck.stopped, Inc: rec.Inc, CheckpointEvery: rec.CheckpointEvery,
		CPUBefore: d.attained(rec), PeakMB: max(rec.PeakBefore, d.procs.PeakMB(rec.ID)), Req: rec.Req, CPU: rec.CPU}
	if ck.stdin {
		hdr.StdinKey = d.procs.StdinKey(r.PID)
	}
	return meta, hdr
}

// ckWrite writes the sealed file under its temporary name, on the state
// directory's disk as the kept ones (a rename moves it there), not on
// the images' tmpfs, and syncs it.
func (o *outMig) ckWrite(r migrate.Record) error {
	d, ck := o.d, o.ck
	plan, err := migrate.NewPlan(ck.hdr, ck.files)
	if err != nil {
		return err
	}
	rec := ck.rec
	cp, err := migrate.NewCheckpointPlan(d.keeper.Bind(r.Job, rec.UID, rec.GID, rec.Groups, ck.cj.User, ck.meta.At), ck.meta, plan)
	if err != nil {
		return err
	}
	if ck.release, err = d.keeper.Hold(rec.UID, cp.Size()); err != nil {
		return err
	}
	ck.bind = cp.Binding()
	if ck.path, err = d.keeper.NewPath("ckpt", r.MID); err != nil {
		return err
	}
	f, err := os.OpenFile(ck.path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	err = cp.Write(bw, d.keeper.Key(), openFile)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	ck.size = cp.Size()
	return err
}

// ckSeal puts the written file under its final name: a file under that
// name is whole and sealed.
func (o *outMig) ckSeal(r migrate.Record) error {
	sealed := o.d.keeper.SealedPath(r.MID)
	if err := os.MkdirAll(filepath.Dir(sealed), 0o700); err != nil {
		return err
	}
	if err := os.Rename(o.ck.path, sealed); err != nil {
		return err
	}
	o.ck.path = sealed
	if d, err := os.Open(filepath.Dir(sealed)); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}

// ckFinish answers whoever asked for the checkpoint, and lets the job go
// back to the push loop and the policies.
func (o *outMig) ckFinish(r migrate.Record, err error) {
	d := o.d
	if o.ck.release != nil {
		o.ck.release() // delivered, or removed
	}
	cp := checkpointNote(o.ck.saved(), d.self, o.ck.storedOn, err)
	d.metrics.ObserveCheckpoint(cp)
	d.log.Info("checkpoint", "job", r.Job, "ok", err == nil, "stop", r.Stop, "stored_on", o.ck.storedOn, "bytes", cp.Bytes,
		"freeze_ms", cp.FreezeMS, "total_ms", phases.Since(o.start), "err", err)
	d.jobs.Release(r.Job, r.PID, err == nil && !r.Stop) // its owner's file could restart it
	d.jobs.KickPush()
	select {
	case o.done <- err:
	default:
	}
}

// checkpointNote is what a job's home keeps of a checkpoint tried on
// node: kept on storedOn ("" for one handed to its user), or failed with
// err.
func checkpointNote(f keeper.File, node, storedOn string, err error) api.Checkpoint {
	cp := api.Checkpoint{At: f.Meta.At, Node: node, FreezeMS: f.Meta.FreezeMS, Bytes: f.Size, StoredOn: storedOn,
		Out: f.Meta.Out, Err: f.Meta.Err, OK: err == nil, CPU: f.Meta.CPU.String()}
	if cp.At.IsZero() {
		cp.At = time.Now()
	}
	if err != nil {
		cp.Error = err.Error()
	}
	return cp
}
