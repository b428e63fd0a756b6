package inbound

// A coming migration's I/O that is not CRIU's: the destination's checks
// of the job's files, as its owner, before and after the restore; the
// archive of its stream read into the images and spool directories; and
// its question to the source.

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"syscall"

	"roam/internal/agent/peer"
	"roam/internal/asuser"
	"roam/internal/errkind"
	"roam/internal/migrate"
)

// CheckFiles says whether this node has a job's open files as the job
// has them: each opens as the job's owner would open it, with no symlink
// on its path, and one that must be the same file (in a shared directory)
// is the very file the source found. It returns what it found at each
// path (the identity on this node), which the restored job's files must
// then be (checkRestoredFiles), and the descriptors the restore hands
// CRIU (kept, by CRIU's key, the caller's to close): each regular file,
// opened so with the job's access, non-blocking, and refused unless it
// is a regular file (a FIFO or a device swapped in is only looked up,
// never opened); for each deleted file, a new one without a name made in
// its directory as the owner. CRIU reopens these descriptors, never the
// paths: a path swapped after the check changes nothing the restored job
// holds. A directory (a working directory) CRIU still reopens by path, as
// root: a path swapped after the check is caught in the restored job by
// checkRestoredFiles.
func (d *Driver) CheckFiles(owner *asuser.Cred, files []migrate.OpenFile) (map[string]migrate.OpenFile, *kept, error) {
	if owner == nil {
		return nil, nil, errkind.New(peer.ErrBadRequest, "the check names no owner of the job's files (the source runs an older roam)")
	}
	if len(files) > migrate.MaxOpenFiles {
		return nil, nil, errkind.New(peer.ErrBadRequest, "%d open files", len(files))
	}
	if len(owner.Groups) > migrate.MaxGroups {
		return nil, nil, errkind.New(peer.ErrBadRequest, "%d supplementary groups", len(owner.Groups))
	}
	wants, err := wantsOf(files)
	if err != nil {
		return nil, nil, err
	}
	found := make(map[string]migrate.OpenFile, len(files))
	k := newKept()
	if len(wants) == 0 {
		return found, k, nil
	}
	got, err := asuser.Open(*owner, wants)
	if err != nil {
		return nil, nil, errkind.New(peer.ErrUnavailable, "check the job's files on node %s: %v", d.self, err)
	}
	err = d.keepFiles(k, files, got)
	for i, f := range files {
		switch {
		case err != nil:
		case got[i].Err != nil && f.Deleted:
			err = errkind.New(peer.ErrPinned, "the deleted file %s on node %s: %v", f.Path, d.self, got[i].Err)
		case got[i].Err != nil:
			err = errkind.New(peer.ErrPinned, "open file %s on node %s: %v", f.Path, d.self, got[i].Err)
		case f.Deleted:
			k.ghosts[f.Key] = f
		case f.Same && !f.SameFile(got[i].FSID, got[i].Ino):
			err = errkind.New(peer.ErrPinned, "open file %s on node %s is not the file the job has open (another file at that path)", f.Path, d.self)
		default:
			found[f.Path] = migrate.OpenFile{Path: f.Path, Access: f.Access, FSID: got[i].FSID, Ino: got[i].Ino, Same: f.Same, Key: f.Key}
		}
	}
	if err != nil {
		k.close()
		return nil, nil, err
	}
	return found, k, nil
}

// wantsOf is what the check opens of files, as the owner: each path, a
// regular file with a key kept open for CRIU, and a deleted file's
// directory to make a file without a name in.
func wantsOf(files []migrate.OpenFile) ([]asuser.Want, error) {
	wants := make([]asuser.Want, len(files))
	for i, f := range files {
		if err := f.Validate(); err != nil {
			return nil, errkind.New(peer.ErrBadRequest, "%v", err)
		}
		wants[i] = asuser.Want{Path: f.Path, Access: f.Access, Keep: f.Key != ""}
		if f.Deleted {
			wants[i] = asuser.Want{Path: path.Dir(f.Path), TmpFile: true}
		}
	}
	return wants, nil
}

// keepFiles keeps in k the descriptors got hands back for files, by key,
// one a key: one file at two paths (hard links) goes to CRIU as one
// descriptor, which must be of the file at both (else the error).
func (d *Driver) keepFiles(k *kept, files []migrate.OpenFile, got []asuser.Got) error {
	var err error
	for i, g := range got {
		if g.File == nil {
			continue
		}
		key := files[i].Key
		if old, dup := k.files[key]; dup {
			if !sameFile(old, g.File) {
				err = errkind.New(peer.ErrPinned, "open file %s on node %s is not the file the job holds at its other path", files[i].Path, d.self)
			}
			g.File.Close()
			continue
		}
		k.files[key] = g.File
	}
	return err
}

// sameFile says whether two descriptors are of one file.
func sameFile(a, b *os.File) bool {
	var sa, sb syscall.Stat_t
	return syscall.Fstat(int(a.Fd()), &sa) == nil && syscall.Fstat(int(b.Fd()), &sb) == nil && sa.Dev == sb.Dev && sa.Ino == sb.Ino
}

// restoredCheck is the check of a restored job that the restore runs
// while CRIU holds its tasks, none of them having run (ckpt.RestoreSpec):
// they run as the job's owner and nobody else (CRIU restored them as root
// from images a member sent), and they hold the files the checks found
// (checked: the descriptors handed to CRIU, and the directories CRIU
// reopened by path, as root, after the checks). what names the step in
// the error.
func (d *Driver) restoredCheck(owner asuser.Cred, checked map[string]migrate.OpenFile, what string) func(pid int) error {
	return func(pid int) error {
		creds, err := d.ckpt.Creds(pid)
		if err == nil {
			err = migrate.CheckCreds(owner.UID, owner.GID, owner.Groups, creds)
		}
		if err == nil {
			err = d.checkRestoredFiles(pid, owner, checked)
		}
		if err != nil {
			return errkind.New(peer.ErrBadRequest, "%s: %v", what, err)
		}
		return nil
	}
}

// checkRestoredFiles says whether the restored job under pid (its tasks
// still stopped) holds the files the check found (checked, from
// CheckFiles), as the owner would find them: a regular file is the
// descriptor the check opened, but CRIU reopened every directory by path,
// as root, after the check, and a path swapped in between would hand the
// job another one (migrate.RestoredFiles). A file the check did not see
// and that is node-local is opened as the owner now, without symlinks,
// and must be the file the restored job holds.
func (d *Driver) checkRestoredFiles(pid int, owner asuser.Cred, checked map[string]migrate.OpenFile) error {
	v := d.ckpt.Inspect(pid, d.members.IPs(), true)
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
func (d *Driver) receive(in *Migration) error {
	hdr := in.hdr
	if in.rst != nil {
		// A restart: the archive is the file's, for a job not here.
		r := in.m.Record()
		if err := d.NotHere(r.Job, r.MID); err != nil {
			return err
		}
		f, br, err := in.rst.Open(d.keeper.Key())
		if err != nil {
			return err
		}
		defer f.Close()
		in.spool, in.body = d.procs.SpoolDir(r.Job), br
	}
	os.RemoveAll(in.spool)
	if hdr.Streamed {
		s := d.moves.ClaimSink(hdr.MID)
		if s == nil {
			return errkind.New(peer.ErrBadRequest, "no page stream for migration %s on node %s", hdr.MID, d.self)
		}
		if err := s.Wait(peer.StallTimeout); err != nil {
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
func (in *Migration) removeImages(background bool) {
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
func (d *Driver) ask(r migrate.InRecord) migrate.Answered {
	var o struct {
		Outcome string `json:"outcome"`
	}
	err := d.peers.Call(r.From, http.MethodGet, peer.MigrateOutcome+"?mid="+r.MID, nil, &o)
	if err != nil {
		return migrate.Answered{Err: err}
	}
	return migrate.Answered{Outcome: migrate.Outcome(o.Outcome)}
}
