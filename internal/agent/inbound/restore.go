package inbound

// The destination's restore, for a migration and a restart alike: CRIU
// restores the copy, stopped, with its files checked as its owner's and
// its stdin a new pipe; once it runs, it goes into its CPU group. And a
// restart's run here (Restart), the room for its memory held for it.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"roam/internal/agent/keeper"
	"roam/internal/agent/peer"
	"roam/internal/agent/phases"
	"roam/internal/agent/reopen"
	"roam/internal/api"
	"roam/internal/asuser"
	"roam/internal/ckpt"
	"roam/internal/errkind"
	"roam/internal/migrate"
)

// settleLater tries again, in the background, to move a restored job
// into its CPU group, which Settle could not (a process of the job forks
// faster than it is read, or the cgroup refused a write): left where the
// restore put it, the job runs outside the node's CPU share. It tries for
// settleTries seconds, while the job lives, then says so in the log and
// the events.
func (d *Driver) settleLater(id string, pid int, tix uint64, err error) {
	d.log.Warn("migration: restored job's CPU group, trying again", "job", id, "err", err)
	// Not in Config.WG: it is started from a request's handler or a
	// timer, which the agent's Close does not wait for (an Add then could
	// race its Wait); it ends at the next tick once the agent stops.
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for range settleTries {
			select {
			case <-d.stop:
				return
			case <-t.C:
			}
			if !d.procs.Alive(pid, tix) {
				return
			}
			if err = d.ckpt.Settle(id, pid); err == nil {
				d.log.Info("migration: restored job in its CPU group", "job", id)
				return
			}
		}
		d.log.Error("migration: restored job's CPU group", "job", id, "err", err)
		d.event(api.Event{Kind: "failed", Job: id, UID: d.jobs.Owner(id), Why: "the migrated job runs outside node " + d.self + "'s CPU group: " + err.Error()})
	}()
}

// settleTries bounds settleLater, one try a second.
const settleTries = 30

// restoreIn restores the job, stopped, in this node's cgroups.
func (d *Driver) restoreIn(in *Migration) (int, error) {
	hdr, rec := in.hdr, in.m.Record()
	if hdr.Slurm != "" && !slices.Contains(hdr.Within, d.self) {
		return 0, errkind.New(peer.ErrBadRequest, "restore on node %s: job %s serves Slurm job %s, whose nodes this is not one of", d.self, hdr.ID, hdr.Slurm)
	}
	owner := asuser.Cred{UID: hdr.UID, GID: hdr.GID, Groups: hdr.Groups}
	checked, k, err := d.checkedFiles(in, owner)
	// CRIU has its own duplicates of them once it runs; the job reopens
	// them (through /proc) as it is restored.
	defer k.close()
	if err != nil {
		return 0, err
	}
	inherit, stdinR, err := restoreStdin(in)
	if err != nil {
		return 0, err
	}
	for key, f := range k.files {
		inherit[key] = f
	}
	mounts := map[string]string{}
	for _, mp := range hdr.Mounts {
		mounts[mp] = mp
	}
	mounts[ckpt.JobDir] = in.spool
	start := time.Now()
	var stopLazy func()
	if hdr.Lazy {
		in.lazy, stopLazy, err = d.pages.StartLazyPages(hdr.From, hdr.MID, in.images)
		in.ph.Add("lazy-pages daemon", start)
		if err != nil {
			if stdinR != nil {
				stdinR.Close()
			}
			return 0, err
		}
	}
	check := d.restoredCheck(owner, checked, "restore on node "+d.self)
	pid, times, err := d.ckpt.Restore(ckpt.RestoreSpec{ID: rec.Job, Dir: in.images, Mounts: mounts, Inherit: inherit, Lazy: hdr.Lazy, LeaveCPU: true, Req: hdr.Req, Check: check,
		UID: hdr.UID, Slurm: hdr.Slurm})
	in.ph.AddTimes(times, true)
	if stdinR != nil {
		stdinR.Close()
	}
	if err != nil {
		if pid > 0 {
			d.procs.Kill(pid, d.procs.StartTicks(pid), 5*time.Second)
		}
		if stopLazy != nil {
			stopLazy() // its restore failed: nothing will fetch from it
		}
		return 0, err
	}
	in.ready = peer.MigrateReady{RestoreMS: phases.Since(start)}
	in.restored = time.Now()
	return pid, nil
}

// checkedFiles is what the checks of migration in found of the job's
// files, and the descriptors they opened as its owner, with each deleted
// file's content written into the file made for it. A restart checks its
// files now, as the owner and without symlinks, right before CRIU takes
// them.
func (d *Driver) checkedFiles(in *Migration, owner asuser.Cred) (map[string]migrate.OpenFile, *kept, error) {
	rec := in.m.Record()
	checked, k := d.moves.TakeChecked(rec.MID, rec.Job), d.held.take(rec.MID, rec.Job)
	if in.rst != nil {
		var err error
		if checked, k, err = d.CheckFiles(&owner, in.rst.File.Meta.Files); err != nil {
			return nil, nil, err
		}
	}
	if k == nil {
		return nil, nil, errkind.New(peer.ErrBadRequest, "restore on node %s: %v", d.self, errNoCheck)
	}
	if err := k.fill(in.images); err != nil {
		return nil, k, fmt.Errorf("restore on node %s: %w", d.self, err)
	}
	return checked, k, nil
}

// restoreStdin is the pipe a restored job reads as its stdin (inherited
// as hdr.StdinKey; none without one) and its reading end, which the
// caller closes: a migration's writing end stays (in.stdin, for the
// stdin to come), a restart's is closed (its user's stdin is not there
// any more: the job reads its end).
func restoreStdin(in *Migration) (map[string]*os.File, *os.File, error) {
	inherit := map[string]*os.File{}
	if in.hdr.StdinKey == "" {
		return inherit, nil, nil
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	if in.rst != nil {
		w.Close()
	} else {
		in.stdin = w
	}
	inherit[in.hdr.StdinKey] = r
	return inherit, r, nil
}

// Restart runs a restart of the checked checkpoint file f (under its
// run's name, which a restarted agent keeps for the run) here, as run
// mid, asking the consent of req's home; it returns once the run ended
// (the job runs here, or nothing of it does), with the run's record.
func (d *Driver) Restart(mid string, f keeper.File, req reopen.Target) (migrate.InRecord, error) {
	in := d.newMigration(mid, f.Hdr.ID)
	in.rst = reopen.NewRun(f, req)
	in.hdr, in.images = in.rst.Header(), filepath.Join(d.imageDir, "restart-"+mid)
	// Room for its memory while it restores; once it runs here (under
	// the id its home gave it), it counts as a local job.
	if err := d.jobs.ReserveMem(d.self, f.Hdr.ID, f.Hdr.Req, d.jobMem, d.admitted(f.Hdr.ID)); err != nil {
		os.Remove(f.Path) // the run's, which no machine holds
		return migrate.InRecord{}, errkind.New(peer.ErrUnavailable, "restart of job %s: %v", f.Hdr.ID, err)
	}
	defer d.jobs.Unreserve(f.Hdr.ID)
	d.moves.Adopt(mid, in)
	_, err := d.step(in, migrate.Restart{MID: mid, Job: f.Hdr.ID, Home: req.Home, File: f.Path})
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.m.Record(), err
}
