// Package spool is the home spools' owner: each home job's stdout and
// stderr, kept at its home under one directory a job, the locks that
// order the writes to them, and each job's incarnation as its spool knows
// it, so that output of a copy older than a restart is never appended
// after the restart cut the spool back to its checkpoint. It does file
// I/O under its own locks and takes no other.
package spool

import (
	"errors"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"roam/internal/job"
	"roam/internal/lockorder"
)

// Streams are the files of a spool.
var Streams = [2]string{"stdout", "stderr"}

// Spools are the home spools under one directory.
type Spools struct {
	root string
	// locks order the writes to each spool (one of a few, by a hash of
	// the job id).
	locks [64]lockorder.Mutex
	// incs is each job's incarnation as its spool knows it (id -> int).
	incs sync.Map
}

// New is the spools under root, their locks of the given rank.
func New(root string, rank lockorder.Rank) *Spools {
	s := &Spools{root: root}
	for i := range s.locks {
		s.locks[i].Init(rank, "a home spool's lock")
	}
	return s
}

// Dir is job id's spool directory.
func (s *Spools) Dir(id string) string { return filepath.Join(s.root, id) }

// Make makes job id's spool directory, the owner's (root's) alone.
func (s *Spools) Make(id string) error { return os.MkdirAll(s.Dir(id), 0o700) }

func (s *Spools) lock(id string) *lockorder.Mutex {
	h := fnv.New32a()
	h.Write([]byte(id))
	return &s.locks[h.Sum32()%uint32(len(s.locks))]
}

// Piece is a piece of a job's output, each stream's at its offset. A
// stream with data, or with a negative offset, is written (a negative
// offset writes nothing and asks for the size); the other's offset is
// taken as its size.
type Piece struct {
	OutOff int64
	Out    []byte
	ErrOff int64
	Err    []byte
}

// Append appends a piece of the output of job id's copy of incarnation
// inc (a resent part is skipped: appendAt) and returns both streams'
// sizes. ok is false, and nothing is written, when the spool was cut for
// a later incarnation.
func (s *Spools) Append(id string, inc int, p Piece) (out, errb int64, ok bool) {
	out, errb = p.OutOff, p.ErrOff
	wOut, wErr := len(p.Out) > 0 || out < 0, len(p.Err) > 0 || errb < 0
	if !wOut && !wErr {
		return out, errb, true
	}
	mu := s.lock(id)
	mu.Lock()
	defer mu.Unlock()
	if known, ok := s.incs.Load(id); ok && inc < known.(int) {
		return 0, 0, false
	}
	if wOut {
		out = appendAt(filepath.Join(s.Dir(id), Streams[0]), p.OutOff, p.Out)
	}
	if wErr {
		errb = appendAt(filepath.Join(s.Dir(id), Streams[1]), p.ErrOff, p.Err)
	}
	return out, errb, true
}

// appendAt appends the part of data past the file's end, when data starts
// at or before it, and returns the file's size.
func appendAt(path string, off int64, data []byte) int64 {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0
	}
	size := fi.Size()
	if off >= 0 && off <= size && off+int64(len(data)) > size {
		n, _ := f.Write(data[size-off:])
		size += int64(n)
	}
	return size
}

// Cut cuts job id's spool back to out and errb bytes for its incarnation
// inc (a restart from a checkpoint): from now on output of an older copy
// is refused.
func (s *Spools) Cut(id string, inc int, out, errb int64) error {
	if err := s.Make(id); err != nil {
		return err
	}
	mu := s.lock(id)
	mu.Lock()
	defer mu.Unlock()
	for i, size := range []int64{out, errb} {
		p := filepath.Join(s.Dir(id), Streams[i])
		fi, err := os.Stat(p)
		if err != nil || fi.Size() <= size {
			continue
		}
		if err := os.Truncate(p, size); err != nil {
			return err
		}
	}
	s.incs.Store(id, inc)
	return nil
}

// Remove removes job id's spool under its lock: an update taken as the
// record goes finds the directory either whole or gone, never half
// removed.
func (s *Spools) Remove(id string) {
	mu := s.lock(id)
	mu.Lock()
	defer mu.Unlock()
	os.RemoveAll(s.Dir(id))
	s.incs.Delete(id)
}

// Sync makes job id's output durable: its files' bytes, and their names,
// in the job's directory and that directory's in the spool root (a crash
// after fsyncs of the files alone could lose a new file, or the job's
// whole directory, with what they held).
func (s *Spools) Sync(id string) error {
	paths := make([]string, 0, len(Streams)+2)
	for _, n := range Streams {
		paths = append(paths, filepath.Join(s.Dir(id), n))
	}
	for _, p := range append(paths, s.Dir(id), s.root) {
		f, err := os.Open(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		err = syncFile(f)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

// syncFile is (*os.File).Sync; tests see what Sync syncs through it.
var syncFile = (*os.File).Sync

// Read is up to max bytes of stream (stdout or stderr) of job id from off.
func (s *Spools) Read(id, stream string, off int64, max int) ([]byte, error) {
	return job.ReadSpool(s.Dir(id), stream, off, max)
}

// Size is what a job has written to the spool in dir (a home spool's
// Dir, or a node's own spool of a job running there).
func Size(dir string) int64 {
	var n int64
	for _, f := range Streams {
		if fi, err := os.Stat(filepath.Join(dir, f)); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// Blocks is what the spool in dir takes of its disk: its files'
// allocated blocks, so a hole costs nothing and a file the disk could not
// hold cannot be written.
func Blocks(dir string) int64 {
	var n int64
	for _, f := range Streams {
		if fi, err := os.Stat(filepath.Join(dir, f)); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			}
		}
	}
	return n
}

// Free is what the disk holding dir has free for anyone, in bytes (the
// blocks a file system keeps for root left out: jobs' writes cannot take
// them); -1 when it cannot be told.
func Free(dir string) int64 {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(dir, &fs); err != nil {
		return -1
	}
	return int64(fs.Bavail) * fs.Bsize
}
