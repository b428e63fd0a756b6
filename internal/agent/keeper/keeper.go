// Package keeper is the owner of the checkpoint files a node holds: the
// periodic checkpoints it keeps for other nodes' jobs (ID.roamckpt, the
// newest of each job), and the files it is writing, taking or restoring
// from (their names begin with a dot). It checks each file's seal, META
// and header before anything trusts it, orders the changes to the kept
// ones under its lock, and never keeps an older file over a newer one.
// It holds each user's budgets of checkpoint files (budget.go): the
// files in flight (written, taken, or restored from) and the kept ones.
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

	"roam/internal/agent/limits"
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
	Bind migrate.Binding
	Meta migrate.CheckpointMeta
	Hdr  migrate.Header
}

// Keeper holds the checkpoint files under one directory.
type Keeper struct {
	dir     string
	key     []byte
	cluster string
	lim     limits.Limits
	now     func() time.Time
	// mu orders the changes to the kept files, and guards the budgets.
	mu lockorder.Mutex
	// leftRuns are the files of restarts an earlier run left (found by
	// RemovePartial at a start), until RemoveLeftRuns.
	leftRuns []string
	// flight is each user's files in flight, held each kept file's
	// owner and size (budget.go).
	flight map[uint32]use
	held   map[string]Kept
}

// New is the keeper of dir, which seals and checks files with key, binds
// the files written here to cluster, and holds each user to the
// checkpoint limits of lim; its lock is of the given rank.
func New(dir string, key []byte, cluster string, lim limits.Limits, rank lockorder.Rank) *Keeper {
	k := &Keeper{dir: dir, key: key, cluster: cluster, lim: lim, now: time.Now, flight: map[uint32]use{}, held: map[string]Kept{}}
	k.mu.Init(rank, "keeper.mu")
	return k
}

// Bind is what a checkpoint of job id, of owner uid (gid, groups, user),
// taken at at, is bound to here.
func (k *Keeper) Bind(id string, uid, gid uint32, groups []uint32, user string, at time.Time) migrate.Binding {
	return migrate.Binding{Cluster: k.cluster, UID: uid, GID: gid, Groups: groups, User: user, Job: id, At: at, Expires: at.Add(k.lim.CheckpointExpiry)}
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

// Take reads a checkpoint file of length bytes from r into a new file
// and checks it: its head first, whose binding must be this cluster's,
// not expired, within limits.checkpoint_bytes and the owner's budget of
// files in flight, and pass admit, before any of its body is read; then
// each chunk as it comes. The file is held in flight until the caller
// calls the release it returns (once it removed or kept the file). The
// caller bounds a read that stalls.
func (k *Keeper) Take(r io.Reader, length int64, mid string, admit func(migrate.Binding) error) (File, func(), error) {
	if length > k.lim.CheckpointBytes {
		return File{}, nil, errkind.New(peer.ErrLimit, "checkpoint of %s: more than this node takes (%s, limits.checkpoint_bytes)", api.Bytes(length), api.Bytes(k.lim.CheckpointBytes))
	}
	path, err := k.NewPath("take", mid)
	if err != nil {
		return File{}, nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_RDWR, 0o600)
	if err != nil {
		return File{}, nil, err
	}
	// What is read is written as it is read: the head, then chunk by
	// chunk, each checked before the next is read.
	br := bufio.NewReaderSize(io.TeeReader(io.LimitReader(r, length), f), 64<<10)
	var release func()
	s, err := k.takeFrom(br, length, func(b migrate.Binding) error {
		err := admit(b)
		if err == nil {
			release, err = k.Hold(b.UID, length)
		}
		return err
	})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		if release != nil {
			release()
		}
		return File{}, nil, err
	}
	s.Path = path
	return s, release, nil
}

// takeFrom reads and checks a file of length bytes from br.
func (k *Keeper) takeFrom(br *bufio.Reader, length int64, admit func(migrate.Binding) error) (File, error) {
	bind, head, body, err := migrate.ReadHead(br, k.key)
	if err != nil {
		return File{}, errkind.New(peer.ErrBadRequest, "%v", err)
	}
	if err := bind.Check(k.cluster, k.now()); err != nil {
		return File{}, errkind.New(peer.ErrBadRequest, "%v", err)
	}
	if n := bind.FileSize(head); n != length {
		return File{}, errkind.New(peer.ErrBadRequest, "checkpoint of job %s: %d bytes sent, its head says %d", bind.Job, length, n)
	}
	if err := admit(bind); err != nil {
		return File{}, err
	}
	s, err := readBody(bind, body)
	if err == nil {
		_, err = io.Copy(io.Discard, body) // the rest, checked chunk by chunk
	}
	if err != nil {
		return File{}, errkind.New(peer.ErrBadRequest, "%v", err)
	}
	s.Size = length
	return s, nil
}

// readBody reads a checked head's body's META and header, and checks
// that they are the job the head binds.
func readBody(bind migrate.Binding, body *migrate.BodyReader) (File, error) {
	meta, hdr, err := migrate.ReadBody(bufio.NewReader(body))
	if err == nil {
		err = bind.Matches(meta, hdr)
	}
	return File{Bind: bind, Meta: meta, Hdr: hdr}, err
}

// Read checks the checkpoint file at path's head and reads its META and
// header (the chunks they are in are checked; the rest is as it is read,
// by the restore).
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
	bind, head, body, err := migrate.ReadHead(bufio.NewReader(f), k.key)
	if err == nil && bind.FileSize(head) != fi.Size() {
		err = errkind.New(migrate.ErrBadCheckpoint, "checkpoint of job %s: %d bytes, its head says %d", bind.Job, fi.Size(), bind.FileSize(head))
	}
	if err != nil {
		return File{}, errkind.New(peer.ErrBadRequest, "%v", err)
	}
	s, err := readBody(bind, body)
	if err != nil {
		return File{}, errkind.New(peer.ErrBadRequest, "%v", err)
	}
	s.Path, s.Size = path, fi.Size()
	return s, nil
}

func (k *Keeper) kept(id string) string { return filepath.Join(k.dir, id+Ext) }

// Keep moves a checked checkpoint file f to the kept ones, as job id's
// newest, unless a newer one is kept: of a later incarnation (a copy
// of an older one, back from a partition, may still send its own), or of
// the same one and taken later; or refuses it past its owner's budget of
// kept files. f.Path is gone after.
func (k *Keeper) Keep(id string, f File) error {
	defer os.Remove(f.Path)
	if err := os.MkdirAll(k.dir, 0o700); err != nil {
		return err
	}
	if f.Bind.Job != id {
		return errkind.New(peer.ErrBadRequest, "checkpoint of job %s kept as job %s", f.Bind.Job, id)
	}
	dst := k.kept(id)
	k.mu.Lock()
	defer k.mu.Unlock()
	if s, err := k.Read(dst); err == nil && (s.Hdr.Inc > f.Hdr.Inc || s.Hdr.Inc == f.Hdr.Inc && s.Meta.At.After(f.Meta.At)) {
		return nil // a newer one is kept already
	}
	if err := k.keptFits(id, f.Bind.UID, f.Size); err != nil {
		return err
	}
	fd, err := os.Open(f.Path)
	if err == nil {
		err = fd.Sync() // durable before it replaces the older one
		fd.Close()
	}
	if err == nil {
		err = os.Rename(f.Path, dst)
	}
	if err == nil {
		k.held[id] = keptOf(f)
	}
	return err
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
	err := os.Remove(p)
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		delete(k.held, id)
		err = nil
	}
	return err
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
// but not delivered; the kept ones stay (but those no restart would
// take: scanKept), and those of restarts (Restarting).
func (k *Keeper) RemovePartial() {
	defer k.scanKept()
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
