package migrate

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"time"
	"unicode/utf8"

	"roam/internal/resources"
)

// A checkpoint file is a job saved by `roam checkpoint` (or periodically),
// which `roam restart` brings back: a migration stream with a line of its
// own before it and a seal after it.
//
//	roam-checkpoint 1\n          the magic and the format version
//	META\n                        CheckpointMeta, one JSON line
//	HEADER\n                      the migration stream: its header line
//	ARCHIVE                       and its archive (img/ and spool/)
//	SEAL                          HMAC-SHA-256 of all the above, 32 bytes
//
// The seal is keyed by a key derived from the cluster secret: CRIU
// restores as root whatever credentials the images hold, so only a file
// an agent of a cluster with this secret wrote is restored. A user who
// edits the file (or writes one) breaks the seal and the restart is
// refused before anything is read from it. The owner may keep, copy and
// delete the file; reading it shows them their own job's memory only.

// CheckpointMagic starts every checkpoint file.
const CheckpointMagic = "roam-checkpoint"

// CheckpointVersion is the format this roam writes and reads.
const CheckpointVersion = 1

// SealSize is the seal's length at the end of a checkpoint file.
const SealSize = sha256.Size

// MaxCheckpointMeta bounds the META line.
const MaxCheckpointMeta = 16 << 20

// ErrBadCheckpoint is the kind of every checkpoint format error.
var ErrBadCheckpoint = errors.New("bad checkpoint")

// CheckpointMeta says what a checkpoint holds besides CRIU's images.
type CheckpointMeta struct {
	Version int `json:"version"`
	// At is when the job was frozen for it; Node is where it ran.
	At   time.Time `json:"at"`
	Node string    `json:"node"`
	// Out and Err are its stdout's and stderr's sizes at that moment:
	// where its output continues after a restart.
	Out int64 `json:"out"`
	Err int64 `json:"err"`
	// Files are the job's open files, mapped files, program, deleted
	// files and working directories, with the keys its images name its
	// regular files by: the node that restarts it checks them, and hands
	// CRIU the descriptors, as the migration's destination does.
	Files []OpenFile `json:"files,omitempty"`
	// Job is its record, to make it again at a home that has none.
	Job CheckpointJob `json:"job"`
	// FreezeMS is how long the job was frozen for it.
	FreezeMS float64 `json:"freeze_ms"`
}

// CheckpointJob is what a checkpoint keeps of the job's record.
type CheckpointJob struct {
	User    string    `json:"user"`
	Argv    []string  `json:"argv"`
	Env     []string  `json:"env"`
	Cwd     string    `json:"cwd"`
	Pin     bool      `json:"pin,omitempty"`
	Group   string    `json:"group"`
	Started time.Time `json:"started"`
	// Req is the job's resource request: a restart keeps it.
	Req resources.Request `json:"req,omitzero"`
}

// Validate checks what a restart relies on in a checkpoint's META.
func (m CheckpointMeta) Validate() error {
	bad := func(f string, a ...any) error { return fmt.Errorf("%w: "+f, append([]any{ErrBadCheckpoint}, a...)...) }
	switch {
	case m.Version != CheckpointVersion:
		return bad("format version %d (this roam reads %d)", m.Version, CheckpointVersion)
	case !nodePattern.MatchString(m.Node):
		return bad("node %q", m.Node)
	case m.Out < 0 || m.Err < 0:
		return bad("negative output offset")
	case len(m.Files) > MaxOpenFiles:
		return bad("%d open files", len(m.Files))
	case len(m.Job.Argv) == 0:
		return bad("no program")
	case !path.IsAbs(m.Job.Cwd) || path.Clean(m.Job.Cwd) != m.Job.Cwd:
		return bad("working directory %q", m.Job.Cwd)
	case m.Job.Group != "":
		if _, ok := JobHome(m.Job.Group); !ok {
			return bad("group %q", m.Job.Group)
		}
	}
	if err := m.Job.Req.Check(); err != nil {
		return bad("%v", err)
	}
	for _, f := range m.Files {
		if err := f.Validate(); err != nil {
			return bad("%v", err)
		}
	}
	return nil
}

// CheckpointPlan is a checkpoint file planned to be written.
type CheckpointPlan struct {
	head   []byte
	stream *Plan
}

// NewCheckpointPlan plans a checkpoint of meta and the stream p.
func NewCheckpointPlan(meta CheckpointMeta, p *Plan) (*CheckpointPlan, error) {
	meta.Version = CheckpointVersion
	if err := meta.Validate(); err != nil {
		return nil, err
	}
	b, err := json.Marshal(meta)
	if err != nil {
		return nil, err
	}
	if len(b)+1 > MaxCheckpointMeta {
		return nil, fmt.Errorf("checkpoint META of %d bytes: more than %d", len(b)+1, MaxCheckpointMeta)
	}
	head := fmt.Appendf(nil, "%s %d\n", CheckpointMagic, CheckpointVersion)
	head = append(append(head, b...), '\n')
	return &CheckpointPlan{head: head, stream: p}, nil
}

// Size is the file's length in bytes, its seal included.
func (c *CheckpointPlan) Size() int64 { return int64(len(c.head)) + c.stream.Size() + SealSize }

// Write writes the file to w, sealed with key.
func (c *CheckpointPlan) Write(w io.Writer, key []byte, open func(path string) (io.ReadCloser, error)) error {
	mac := hmac.New(sha256.New, key)
	mw := io.MultiWriter(w, mac)
	if _, err := mw.Write(c.head); err != nil {
		return err
	}
	if err := c.stream.Write(mw, open); err != nil {
		return err
	}
	_, err := w.Write(mac.Sum(nil))
	return err
}

// VerifySeal checks the seal of the checkpoint file r of size bytes.
func VerifySeal(r io.ReaderAt, size int64, key []byte) error {
	if size < SealSize {
		return fmt.Errorf("%w: %d bytes, too short", ErrBadCheckpoint, size)
	}
	mac := hmac.New(sha256.New, key)
	if _, err := io.Copy(mac, io.NewSectionReader(r, 0, size-SealSize)); err != nil {
		return err
	}
	seal := make([]byte, SealSize)
	if _, err := r.ReadAt(seal, size-SealSize); err != nil {
		return err
	}
	if !hmac.Equal(seal, mac.Sum(nil)) {
		return fmt.Errorf("%w: its seal does not match: not written by an agent of this cluster, or changed since", ErrBadCheckpoint)
	}
	return nil
}

// ReadCheckpoint reads a checkpoint's magic line, META and stream header
// from br, which must end where the seal begins; the archive follows in
// br. Call it on a file whose seal VerifySeal checked.
func ReadCheckpoint(br *bufio.Reader) (CheckpointMeta, Header, error) {
	magic, err := readLine(br, 64)
	if err != nil {
		return CheckpointMeta{}, Header{}, err
	}
	var version int
	if n, err := fmt.Sscanf(string(magic), CheckpointMagic+" %d\n", &version); n != 1 || err != nil {
		return CheckpointMeta{}, Header{}, fmt.Errorf("%w: not a roam checkpoint", ErrBadCheckpoint)
	}
	if version != CheckpointVersion {
		return CheckpointMeta{}, Header{}, fmt.Errorf("%w: format version %d (this roam reads %d)", ErrBadCheckpoint, version, CheckpointVersion)
	}
	line, err := readLine(br, MaxCheckpointMeta)
	if err != nil {
		return CheckpointMeta{}, Header{}, err
	}
	if !utf8.Valid(line) {
		return CheckpointMeta{}, Header{}, fmt.Errorf("%w: META is not UTF-8", ErrBadCheckpoint)
	}
	var m CheckpointMeta
	if err := json.Unmarshal(line, &m); err != nil {
		return CheckpointMeta{}, Header{}, fmt.Errorf("%w: META: %v", ErrBadCheckpoint, err)
	}
	if err := m.Validate(); err != nil {
		return CheckpointMeta{}, Header{}, err
	}
	h, err := ReadHeader(br)
	if err != nil {
		return CheckpointMeta{}, Header{}, fmt.Errorf("%w: %v", ErrBadCheckpoint, err)
	}
	if h.Lazy || h.Streamed {
		return CheckpointMeta{}, Header{}, fmt.Errorf("%w: its images lack their pages", ErrBadCheckpoint)
	}
	return m, h, nil
}

// readLine reads one line of at most max bytes, its newline included.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		part, err := br.ReadSlice('\n')
		if len(line)+len(part) > max {
			return nil, fmt.Errorf("%w: a line longer than %d bytes", ErrBadCheckpoint, max)
		}
		line = append(line, part...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadCheckpoint, err)
		}
		return line, nil
	}
}
