// Package keeper is the owner of the checkpoint files a node holds: the
// periodic checkpoints it keeps for other nodes' jobs (ID.roamckpt, the
// newest of each job), and the files it is writing, taking or restoring
// from (their names begin with a dot). It checks each file's seal, META
// and header before anything trusts it, orders the changes to the kept
// ones under its lock, and never keeps an older file over a newer one.
package keeper

import (
	"bufio"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/api"
	"roam/internal/errkind"
	"roam/internal/lockorder"
	"roam/internal/migrate"
)

// Ext ends every checkpoint file's name.
const Ext = ".roamckpt"

// File is a checked checkpoint file.
type File struct {
	Path string
	Size int64
	Meta migrate.CheckpointMeta
	Hdr  migrate.Header
}

// Keeper holds the checkpoint files under one directory.
type Keeper struct {
	dir string
	key []byte
	max int64
	// mu orders the changes to the kept files.
	mu lockorder.Mutex
	// leftRuns are the files of restarts an earlier run left (found by
	// RemovePartial at a start), until RemoveLeftRuns.
	leftRuns []string
}

// New is the keeper of dir, which seals and checks files with key and
// takes none larger than maxBytes (limits.checkpoint_bytes); its lock is
// of the given rank.
func New(dir string, key []byte, maxBytes int64, rank lockorder.Rank) *Keeper {
	k := &Keeper{dir: dir, key: key, max: maxBytes}
	k.mu.Init(rank, "keeper.mu")
	return k
}

// Dir is the keeper's directory.
func (k *Keeper) Dir() string { return k.dir }

// Key seals and checks checkpoint files.
func (k *Keeper) Key() []byte { return k.key }

// NewPath is the path of a new file of the keeper's being written or
// taken (kind: ckpt, take, restore), on the state directory's disk as the
// kept ones, so a rename keeps it.
func (k *Keeper) NewPath(kind, mid string) (string, error) {
	if err := os.MkdirAll(k.dir, 0o700); err != nil {
		return "", err
	}
	return filepath.Join(k.dir, "."+kind+"-"+mid+Ext), nil
}

// SealedPath is where a checkpoint this node writes is put once whole
// and sealed, until it is delivered (sealed/MID.roamckpt): apart from
// the kept ones, and removed with the partial ones at a start.
func (k *Keeper) SealedPath(mid string) string { return filepath.Join(k.dir, "sealed", mid+Ext) }

// Take reads a checkpoint file from r (at most the keeper's bound) into a
// new file and checks it. The caller bounds a read that stalls.
func (k *Keeper) Take(r io.Reader, length int64, mid string) (File, error) {
	if length > k.max {
		return File{}, errkind.New(peer.ErrBadRequest, "checkpoint of %s: more than this node takes (%s, limits.checkpoint_bytes)", api.Bytes(length), api.Bytes(k.max))
	}
	path, err := k.NewPath("take", mid)
	if err != nil {
		return File{}, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return File{}, err
	}
	n, err := io.Copy(f, io.LimitReader(r, k.max+1))
	if err == nil && n > k.max {
		err = errkind.New(peer.ErrBadRequest, "checkpoint: more than this node takes (%s, limits.checkpoint_bytes)", api.Bytes(k.max))
	}
	if err == nil {
		var s File
		if s, err = k.check(f, n); err == nil {
			f.Close()
			s.Path = path
			return s, nil
		}
	}
	f.Close()
	os.Remove(path)
	return File{}, err
}

// check checks a checkpoint file's seal and reads its META and header.
func (k *Keeper) check(f *os.File, size int64) (File, error) {
	if err := migrate.VerifySeal(f, size, k.key); err != nil {
		return File{}, errkind.New(peer.ErrBadRequest, "%v", err)
	}
	meta, hdr, err := migrate.ReadCheckpoint(bufio.NewReader(io.NewSectionReader(f, 0, size-migrate.SealSize)))
	if err != nil {
		return File{}, errkind.New(peer.ErrBadRequest, "%v", err)
	}
	return File{Size: size, Meta: meta, Hdr: hdr}, nil
}

// Read checks the checkpoint file at path and reads its META and header.
func (k *Keeper) Read(path string) (File, error) {
	f, err := os.Open(path)
	if err != nil {
		return File{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return File{}, err
	}
	s, err := k.check(f, fi.Size())
	s.Path = path
	return s, err
}

func (k *Keeper) kept(id string) string { return filepath.Join(k.dir, id+Ext) }

// Keep moves a checked checkpoint file at path to the kept ones, as job
// id's newest, unless a newer one is kept: of a later incarnation (a copy
// of an older one, back from a partition, may still send its own), or of
// the same one and taken later. path is gone after.
func (k *Keeper) Keep(id, path string, inc int, at time.Time) error {
	defer os.Remove(path)
	if err := os.MkdirAll(k.dir, 0o700); err != nil {
		return err
	}
	dst := k.kept(id)
	k.mu.Lock()
	defer k.mu.Unlock()
	if s, err := k.Read(dst); err == nil && (s.Hdr.Inc > inc || s.Hdr.Inc == inc && s.Meta.At.After(at)) {
		return nil // a newer one is kept already
	}
	f, err := os.Open(path)
	if err == nil {
		err = f.Sync() // durable before it replaces the older one
		f.Close()
	}
	if err != nil {
		return err
	}
	return os.Rename(path, dst)
}

// Stored is the path of job id's kept checkpoint, "" when none is.
func (k *Keeper) Stored(id string) string {
	if _, ok := migrate.JobHome(id); !ok {
		return ""
	}
	p := k.kept(id)
	if _, err := os.Stat(p); err != nil {
		return ""
	}
	return p
}

// Drop removes job id's kept checkpoint, unless it was taken at or after
// before (zero: any goes).
func (k *Keeper) Drop(id string, before time.Time) error {
	p := k.Stored(id)
	if p == "" {
		return nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if !before.IsZero() {
		if s, err := k.Read(p); err == nil && !s.Meta.At.Before(before) {
			return nil
		}
	}
	return os.Remove(p)
}

// Open is job id's kept checkpoint, checked, as a file of its own (a
// link, which the caller removes): a newer one kept meanwhile replaces
// the name, not what is checked and restored. self names this node in
// the error when none is kept.
func (k *Keeper) Open(id, mid, self string) (File, error) {
	own, err := k.NewPath("restore", mid)
	if err != nil {
		return File{}, err
	}
	k.mu.Lock()
	err = os.Link(k.kept(id), own)
	k.mu.Unlock()
	if errors.Is(err, fs.ErrNotExist) {
		return File{}, errkind.New(peer.ErrNotFound, "node %s keeps no checkpoint of job %s", self, id)
	}
	if err != nil {
		return File{}, err
	}
	s, err := k.Read(own)
	if err != nil {
		os.Remove(own)
	}
	return s, err
}

// Restarting is the kind (NewPath) of the file a restart runs from until
// its run ends: a restarted agent finishes the run (its Adopt reads the
// file's header), so RemovePartial leaves it; the run removes it.
const Restarting = "restart"

// RemoveLeftRuns removes the files of restarts an earlier run of the
// agent left (RemovePartial found them) whose run is not in runs: the
// agent keeps those of the runs it finishes, and no other is read again.
// A restart begun since the start keeps its file.
func (k *Keeper) RemoveLeftRuns(runs map[string]bool) {
	k.mu.Lock()
	left := k.leftRuns
	k.leftRuns = nil
	k.mu.Unlock()
	for _, name := range left {
		mid := strings.TrimSuffix(strings.TrimPrefix(name, "."+Restarting+"-"), Ext)
		if !runs[mid] {
			os.Remove(filepath.Join(k.dir, name))
		}
	}
}

// RemovePartial removes the files an earlier run was writing, taking or
// restoring from (their names begin with a dot), and those it had sealed
// but not delivered; the kept ones stay, and those of restarts
// (Restarting).
func (k *Keeper) RemovePartial() {
	ents, _ := os.ReadDir(k.dir)
	var runs []string
	for _, e := range ents {
		switch {
		case !strings.HasPrefix(e.Name(), ".") || !e.Type().IsRegular():
		case strings.HasPrefix(e.Name(), "."+Restarting+"-"):
			runs = append(runs, e.Name())
		default:
			os.Remove(filepath.Join(k.dir, e.Name()))
		}
	}
	os.RemoveAll(filepath.Join(k.dir, "sealed"))
	k.mu.Lock()
	k.leftRuns = runs
	k.mu.Unlock()
}
