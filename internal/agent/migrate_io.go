package agent

// A migration's I/O that is not CRIU's: the stream of header and archive
// (format in package migrate) and the destination's images directory, the
// destination's checks and its question to the source, and reading a
// job's descriptors for the pin rules (rules in package migrate).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"syscall"

	"roam/internal/agent/peer"
	"roam/internal/agent/stall"
	"roam/internal/api"
	"roam/internal/asuser"
	"roam/internal/errkind"
	"roam/internal/migrate"
)

// streamFiles lists the regular files of the images and spool directories
// for the stream, and the FIFOs of the spool (a job's own FIFO).
func streamFiles(images, spool string) ([]migrate.File, error) {
	var out []migrate.File
	for _, part := range []struct{ prefix, dir string }{{migrate.DirImages + "/", images}, {migrate.DirSpool + "/", spool}} {
		ents, err := os.ReadDir(part.dir)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if e.Type()&fs.ModeNamedPipe != 0 && part.dir == spool {
				out = append(out, migrate.File{Name: part.prefix + e.Name(), Path: filepath.Join(part.dir, e.Name()), FIFO: true})
				continue
			}
			if !e.Type().IsRegular() {
				continue
			}
			fi, err := e.Info()
			if err != nil {
				return nil, err
			}
			out = append(out, migrate.File{Name: part.prefix + e.Name(), Path: filepath.Join(part.dir, e.Name()), Size: fi.Size()})
		}
	}
	return out, nil
}

func openFile(path string) (io.ReadCloser, error) { return os.Open(path) }

// sendImages streams the header, the images and the spool files to the
// destination, and waits for its "ready": a restored, stopped copy.
func (a *Agent) sendImages(addr string, hdr migrate.Header, images, spool string) (int64, migrateReady, error) {
	files, err := streamFiles(images, spool)
	if err != nil {
		return 0, migrateReady{}, err
	}
	plan, err := migrate.NewPlan(hdr, files)
	if err != nil {
		return 0, migrateReady{}, err
	}
	var ready migrateReady
	n, stalled, err := a.postStream(addr, peer.MigrateStream, plan.Size(), func(w io.Writer) error { return plan.Write(w, openFile) }, &ready)
	if stalled && err != nil {
		return n, migrateReady{}, fmt.Errorf("transfer stalled after %d bytes (no progress for %s): %v", n, stallTimeout, err)
	}
	var te *api.TransportError
	var re *api.RemoteError
	switch {
	case errors.As(err, &te):
		return n, migrateReady{}, te.Err
	case errors.As(err, &re):
		return n, migrateReady{}, errors.New(re.Msg)
	}
	return n, ready, err
}

// postStream posts the size bytes write makes to path on the peer at
// addr and decodes the answer into out. No progress for stallTimeout while
// sending, or no answer within restoreTimeout after, ends it. It returns
// the bytes sent, whether the stall guard ended it, and api.Exchange's
// error.
func (a *Agent) postStream(addr, path string, size int64, write func(io.Writer) error, out any) (int64, bool, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wd := stall.Watch(stallTimeout, cancel)
	defer wd.Stop()
	pr, pw := io.Pipe()
	ww := stall.NewWriter(pw, wd)
	written := make(chan struct{})
	go func() {
		defer close(written)
		err := write(ww)
		pw.CloseWithError(err)
		if err != nil {
			cancel()
			return
		}
		wd.Expect(restoreTimeout)
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+path, pr)
	if err == nil {
		req.ContentLength = size
		err = api.Exchange(a.peers.HTTP, req, out)
	}
	// The count is read once the writer returned: an answer before the
	// last byte went (an error) ends its writes.
	pr.Close()
	<-written
	return ww.Written(), wd.Stalled(), err
}

// migrateReady is the destination's answer: a stopped copy is restored.
type migrateReady struct {
	RestoreMS float64 `json:"restore_ms"`
	// SettleMS is from the end of the restore to the answer: the check
	// of the restored tasks' credentials and the durable ledger record.
	SettleMS float64 `json:"settle_ms"`
	// Phases are the destination's steps from the stream's header on.
	Phases []api.Phase `json:"phases,omitempty"`
}

// migrateCommitted is the destination's answer to a commit: the steps it
// took to resume the copy.
type migrateCommitted struct {
	Phases []api.Phase `json:"phases,omitempty"`
}

// checkFiles says whether this node has a job's open files as the job
// has them: each opens as the job's owner would open it, with no symlink
// on its path, and one that must be the same file (in a shared directory)
// is the very file the source found. CRIU reopens them as root at the
// restore; without this, a user could point a path at a file of root's
// (a symlink made by another of their jobs on this node) and the
// restored job would hold it. It returns what it found at each path (the
// identity on this node), which the restored job's files must then be
// (checkRestoredFiles): a path swapped after the check is caught there.
func (a *Agent) checkFiles(owner *asuser.Cred, files []migrate.OpenFile) (map[string]migrate.OpenFile, error) {
	if owner == nil {
		return nil, errkind.New(peer.ErrBadRequest, "the check names no owner of the job's files (the source runs an older roam)")
	}
	if len(files) > migrate.MaxOpenFiles {
		return nil, errkind.New(peer.ErrBadRequest, "%d open files", len(files))
	}
	if len(owner.Groups) > migrate.MaxGroups {
		return nil, errkind.New(peer.ErrBadRequest, "%d supplementary groups", len(owner.Groups))
	}
	wants := make([]asuser.Want, len(files))
	for i, f := range files {
		if err := f.Validate(); err != nil {
			return nil, errkind.New(peer.ErrBadRequest, "%v", err)
		}
		wants[i] = asuser.Want{Path: f.Path, Access: f.Access}
	}
	found := make(map[string]migrate.OpenFile, len(files))
	if len(wants) == 0 {
		return found, nil
	}
	got, err := asuser.Open(*owner, wants)
	if err != nil {
		return nil, errkind.New(peer.ErrUnavailable, "check the job's files on node %s: %v", a.cfg.NodeID, err)
	}
	for i, f := range files {
		switch {
		case got[i].Err != nil:
			return nil, errkind.New(peer.ErrPinned, "open file %s on node %s: %v", f.Path, a.cfg.NodeID, got[i].Err)
		case f.Same && !f.SameFile(got[i].FSID, got[i].Ino):
			return nil, errkind.New(peer.ErrPinned, "open file %s on node %s is not the file the job has open (another file at that path)", f.Path, a.cfg.NodeID)
		}
		found[f.Path] = migrate.OpenFile{Path: f.Path, Access: f.Access, FSID: got[i].FSID, Ino: got[i].Ino, Same: f.Same}
	}
	return found, nil
}

// restoredCheck is the check of a restored job that the restore runs
// while CRIU holds its tasks, none of them having run (ckpt.RestoreSpec):
// they run as the job's owner and nobody else (CRIU restored them as root
// from images a member sent), and they hold the files the checks found
// (checked; CRIU reopened each by path, as root, after the checks). what
// names the step in the error.
func (a *Agent) restoredCheck(owner asuser.Cred, checked map[string]migrate.OpenFile, what string) func(pid int) error {
	return func(pid int) error {
		creds, err := a.ckpt.Creds(pid)
		if err == nil {
			err = migrate.CheckCreds(owner.UID, owner.GID, owner.Groups, creds)
		}
		if err == nil {
			err = a.checkRestoredFiles(pid, owner, checked)
		}
		if err != nil {
			return errkind.New(peer.ErrBadRequest, "%s: %v", what, err)
		}
		return nil
	}
}

// checkRestoredFiles says whether the restored job under pid (its tasks
// still stopped) holds the files the check found (checked, from
// checkFiles), as the owner would find them: CRIU reopened every file by
// path, as root, after the check, and a path swapped in between would
// hand the job another file (migrate.RestoredFiles). A file the check did
// not see and that is node-local (a library a child the job started
// since maps) is opened as the owner now, without symlinks, and must be
// the file the restored job holds.
func (a *Agent) checkRestoredFiles(pid int, owner asuser.Cred, checked map[string]migrate.OpenFile) error {
	v := a.ckpt.Inspect(pid, a.members.IPs(), true)
	if v.Pin != "" {
		return fmt.Errorf("the restored job: %s", v.Pin)
	}
	later, err := migrate.RestoredFiles(checked, v.Files)
	if err != nil {
		return err
	}
	if len(later) == 0 {
		return nil
	}
	wants := make([]asuser.Want, len(later))
	for i, f := range later {
		wants[i] = asuser.Want{Path: f.Path, Access: f.Access}
	}
	got, err := asuser.Open(owner, wants)
	if err != nil {
		return fmt.Errorf("check the restored job's files: %w", err)
	}
	for i, f := range later {
		switch {
		case got[i].Err != nil:
			return fmt.Errorf("the restored job holds %s, which its owner cannot open so: %v", f.Path, got[i].Err)
		case !f.SameFile(got[i].FSID, got[i].Ino):
			return fmt.Errorf("the restored job holds %s, which is not the file its owner finds at that path", f.Path)
		}
	}
	return nil
}

// readArchive extracts a migration's archive: img/NAME into images,
// spool/NAME into spool, each a new file.
func readArchive(r io.Reader, images, spool string) error {
	err := migrate.ReadArchive(r, func(dir, name string, fifo bool) (io.WriteCloser, error) {
		base := images
		if dir == migrate.DirSpool {
			base = spool
		}
		dst := filepath.Join(base, name)
		if fifo {
			// mknod makes a new node or fails: it follows no symlink.
			if err := syscall.Mkfifo(dst, 0o600); err != nil {
				return nil, fmt.Errorf("make FIFO %s: %w", dst, err)
			}
			return nil, nil
		}
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, fmt.Errorf("write image %s: %w", dst, err)
		}
		return f, nil
	})
	if errors.Is(err, migrate.ErrBadArchive) {
		return errkind.New(peer.ErrBadRequest, "%v", err)
	}
	return err
}

// receive reads the archive into the images and spool directories; an
// eager migration's pages are in its sink's directory already, a
// restart's archive is in its file.
func (a *Agent) receive(in *inMig) error {
	hdr := in.hdr
	if in.rst != nil {
		// A restart: the archive is the file's, for a job not here.
		r := in.m.Record()
		if err := a.notHere(r.Job, r.MID); err != nil {
			return err
		}
		f, br, err := in.rst.Open()
		if err != nil {
			return err
		}
		defer f.Close()
		in.spool, in.body = a.procs.SpoolDir(r.Job), br
	}
	os.RemoveAll(in.spool)
	if hdr.Streamed {
		s := a.migr.ClaimSink(hdr.MID)
		if s == nil {
			return errkind.New(peer.ErrBadRequest, "no page stream for migration %s on node %s", hdr.MID, a.cfg.NodeID)
		}
		if err := s.Wait(stallTimeout); err != nil {
			return err
		}
		in.images = s.Dir()
	} else {
		os.RemoveAll(in.images)
		if err := os.MkdirAll(in.images, 0o700); err != nil {
			return fmt.Errorf("images directory: %w", err)
		}
	}
	if err := os.MkdirAll(in.spool, 0o700); err != nil {
		return fmt.Errorf("spool directory: %w", err)
	}
	err := readArchive(in.body, in.images, in.spool)
	in.body = nil
	return err
}

// removeImages removes a migration's images, once its lazy-pages daemon
// (if any) no longer reads them; background: without waiting for that
// (nothing needs the directory gone now).
func (in *inMig) removeImages(background bool) {
	dir, lazy := in.images, in.lazy
	if dir == "" {
		return
	}
	if lazy == nil && !background {
		os.RemoveAll(dir)
		return
	}
	go func() {
		if lazy != nil {
			<-lazy
		}
		os.RemoveAll(dir)
	}()
}

// ask asks the source how the migration ended.
func (a *Agent) ask(r migrate.InRecord) migrate.Answered {
	var o struct {
		Outcome string `json:"outcome"`
	}
	err := a.peers.Call(r.From, http.MethodGet, peer.MigrateOutcome+"?mid="+r.MID, nil, &o)
	if err != nil {
		return migrate.Answered{Err: err}
	}
	return migrate.Answered{Outcome: migrate.Outcome(o.Outcome)}
}
