package inbound

// The descriptors a coming migration's check opened as the job's owner,
// kept for its restore: CRIU takes the job's regular files as these very
// descriptors (ckpt.RestoreSpec.Inherit), so nothing a user swaps at a
// path after the check reaches the restored job, and CRIU opens none of
// the user's paths as root.

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"roam/internal/agent/moves"
	"roam/internal/agent/peer"
	"roam/internal/errkind"
	"roam/internal/migrate"
)

// kept are one check's descriptors, by CRIU key: the files it opened as
// the owner, and for each deleted file one it made without a name, to be
// filled with the file's content before the restore (ghosts says its
// mode and size).
type kept struct {
	files  map[string]*os.File
	ghosts map[string]migrate.OpenFile
}

func newKept() *kept {
	return &kept{files: map[string]*os.File{}, ghosts: map[string]migrate.OpenFile{}}
}

// close closes every descriptor (nil: none).
func (k *kept) close() {
	if k == nil {
		return
	}
	for _, f := range k.files {
		f.Close()
	}
	clear(k.files)
}

// len is how many descriptors it holds.
func (k *kept) len() int {
	if k == nil {
		return 0
	}
	return len(k.files)
}

// merge moves what o holds into k, a late check's into the first's; a
// key k holds already keeps k's descriptor (the same file: the key names
// it), and o's goes.
func (k *kept) merge(o *kept) {
	for key, f := range o.files {
		if _, ok := k.files[key]; ok {
			f.Close()
			continue
		}
		k.files[key] = f
	}
	for key, g := range o.ghosts {
		k.ghosts[key] = g
	}
	clear(o.files)
}

// fill writes each deleted file's content, which the images carry
// (migrate.GhostImage), into the file made for it, and gives it the
// file's mode. The agent writes through the descriptor its owner opened:
// the file is the owner's, charged to the owner's quota.
func (k *kept) fill(images string) error {
	for key, g := range k.ghosts {
		f := k.files[key]
		if f == nil {
			return fmt.Errorf("no file made for the deleted file %s", g.Path)
		}
		src, err := os.OpenFile(filepath.Join(images, migrate.GhostImage(key)), os.O_RDONLY|syscall.O_NOFOLLOW, 0)
		if err != nil {
			return fmt.Errorf("the deleted file %s: %w", g.Path, err)
		}
		n, err := io.Copy(io.NewOffsetWriter(f, 0), src)
		src.Close()
		if err == nil && n != g.Size {
			err = fmt.Errorf("%d bytes in the images, not %d", n, g.Size)
		}
		if err == nil {
			err = f.Truncate(g.Size)
		}
		if err == nil {
			err = f.Chmod(os.FileMode(g.Mode))
		}
		if err != nil {
			return fmt.Errorf("make the deleted file %s again: %w", g.Path, err)
		}
	}
	return nil
}

// MaxHeld bounds the descriptors this node keeps from the checks of
// migrations still to come, all together: far below the agent's limit on
// open files (20,000 on the test hosts, 2^20 under systemd), so that the
// checks of a few large jobs cannot starve the agent of descriptors. A
// check that would pass it is refused, and its job runs on at its source.
// Each check's are kept for moves.CheckedKeep at most, as what it found.
const MaxHeld = 8192

// holds are the kept descriptors of the checks of migrations still to
// come, by migration id. Its lock is a leaf, and no descriptor is closed
// under it.
type holds struct {
	mu sync.Mutex
	by map[string]*hold
	n  int // descriptors in by
}

// hold is one migration's.
type hold struct {
	job   string
	k     *kept
	timer *time.Timer
}

// keep keeps k, the check of migration mid of job: refused (and k
// closed) past MaxHeld, or when a check of mid is kept already.
func (h *holds) keep(mid, job string, k *kept) error {
	h.mu.Lock()
	if h.by == nil {
		h.by = map[string]*hold{}
	}
	_, known := h.by[mid]
	full := h.n+k.len() > MaxHeld
	if !known && !full {
		hd := &hold{job: job, k: k}
		hd.timer = time.AfterFunc(moves.CheckedKeep, func() { h.expire(mid, hd) })
		h.by[mid] = hd
		h.n += k.len()
	}
	n := h.n
	h.mu.Unlock()
	switch {
	case known:
		k.close()
		return errkind.New(peer.ErrBadRequest, "migration %s is checked already", mid)
	case full:
		k.close()
		return errkind.New(peer.ErrUnavailable, "the job's %d files would pass the %d descriptors this node keeps for the migrations it checked (%d kept)", k.len(), MaxHeld, n)
	}
	return nil
}

// add adds k, a late check of migration mid of job, to its first check's
// (closing k when refused).
func (h *holds) add(mid, job string, k *kept) error {
	h.mu.Lock()
	hd, ok := h.by[mid]
	var err error
	switch {
	case !ok || hd.job != job:
		err = errkind.New(peer.ErrBadRequest, "late check of migration %s of job %s: no check of it is kept", mid, job)
	case h.n+k.len() > MaxHeld:
		err = errkind.New(peer.ErrUnavailable, "the job's %d late files would pass the %d descriptors this node keeps for the migrations it checked", k.len(), MaxHeld)
	default:
		before := hd.k.len()
		hd.k.merge(k)
		h.n += hd.k.len() - before
	}
	h.mu.Unlock()
	k.close() // what merge left: nothing, or all when refused
	return err
}

// take returns and forgets the check of migration mid, if it was of job
// (nil: none kept, and one of another job is closed).
func (h *holds) take(mid, job string) *kept {
	hd := h.remove(mid, nil)
	if hd == nil {
		return nil
	}
	if hd.job != job {
		hd.k.close()
		return nil
	}
	return hd.k
}

// drop closes the check of migration mid, if one is kept.
func (h *holds) drop(mid string) {
	if hd := h.remove(mid, nil); hd != nil {
		hd.k.close()
	}
}

// expire drops hd, the check of migration mid, if it is still kept: a
// migration that never came (its source died) keeps nothing open for
// long.
func (h *holds) expire(mid string, hd *hold) {
	if h.remove(mid, hd) != nil {
		hd.k.close()
	}
}

// remove forgets the check of mid (only if it is only, when only is
// set) and returns it.
func (h *holds) remove(mid string, only *hold) *hold {
	h.mu.Lock()
	defer h.mu.Unlock()
	hd, ok := h.by[mid]
	if !ok || (only != nil && hd != only) {
		return nil
	}
	delete(h.by, mid)
	h.n -= hd.k.len()
	hd.timer.Stop()
	return hd
}

// count is how many descriptors are kept: for a test.
func (h *holds) count() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.n
}

// errNoCheck is the restore's error when its migration's check is not
// kept (gone after moves.CheckedKeep, or the agent restarted since).
var errNoCheck = errors.New("the check's descriptors of the job's files are no longer kept")
