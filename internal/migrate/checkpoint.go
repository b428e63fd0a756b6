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
	"slices"
	"time"
	"unicode/utf8"

	"roam/internal/cpufeat"
	"roam/internal/resources"
)

// A checkpoint file is a job saved by `roam checkpoint` (or periodically),
// which `roam restart` brings back: a migration stream with a head of its
// own before it, cut into sealed chunks.
//
//	roam-checkpoint 2\n          the magic and the format version
//	BIND\n                        Binding, one JSON line: the cluster, the
//	                              owner, the job, the expiry, the body's size
//	SEAL                          HMAC-SHA-256 of the two lines, 32 bytes
//	CHUNK SEAL ...                the body in chunks of CheckpointChunk
//	                              bytes (the last may be shorter), each
//	                              followed by HMAC-SHA-256(previous seal,
//	                              chunk)
//
// and the body is
//
//	META\n                        CheckpointMeta, one JSON line
//	HEADER\n                      the migration stream: its header line
//	ARCHIVE                       and its archive (img/ and spool/)
//
// The seals are keyed by a key derived from the cluster secret: CRIU
// restores as root whatever credentials the images hold, so only a file
// an agent of a cluster with this secret wrote is restored. A user who
// edits the file (or writes one) breaks a seal and the restart is
// refused at that chunk: the head is checked, and the caller, the
// cluster, the expiry and the user's budgets judged from it, before the
// body is taken, and each chunk is checked as it comes, so an upload of
// garbage costs the node one chunk, not the file's size on its disk.
// Each seal chains the one before it, so chunks cannot be reordered,
// dropped or taken from another file. The owner may keep, copy and
// delete the file; reading it shows them their own job's memory only.

// CheckpointMagic starts every checkpoint file.
const CheckpointMagic = "roam-checkpoint"

// CheckpointVersion is the format this roam writes and reads. Version 1
// had one seal at its end, and no binding: it is refused (Binding).
const CheckpointVersion = 2

// CheckpointChunk is the size of a checkpoint body's sealed chunks: what
// an upload of garbage writes before it is refused, and what a seal per
// chunk adds (32 bytes in 256 KiB, 0.01%).
const CheckpointChunk = 256 << 10

// SealSize is the length of a checkpoint file's seals.
const SealSize = sha256.Size

// MaxCheckpointMeta bounds the META line.
const MaxCheckpointMeta = 16 << 20

// maxBinding bounds the binding's line.
const maxBinding = 4096

// ErrBadCheckpoint is the kind of every checkpoint format error.
var ErrBadCheckpoint = errors.New("bad checkpoint")

// ErrCheckpointExpired is the kind of the refusal of a file past its
// expiry, or of another cluster's (Binding.Check).
var ErrCheckpointExpired = errors.New("checkpoint refused")

// Binding is what a checkpoint file is bound to, in its head: the
// cluster that wrote it (config cluster_name), its job's owner, the job
// and when it was saved, the time after which no agent restarts it
// (limits.checkpoint_expiry), and the size of its body.
type Binding struct {
	Cluster string    `json:"cluster"`
	UID     uint32    `json:"uid"`
	GID     uint32    `json:"gid"`
	Groups  []uint32  `json:"groups,omitempty"`
	User    string    `json:"user"`
	Job     string    `json:"job"`
	At      time.Time `json:"at"`
	Expires time.Time `json:"expires"`
	// Body is the body's size in bytes, without its chunks' seals.
	Body int64 `json:"body"`
}

// validate checks a binding read from a file.
func (b Binding) validate() error {
	bad := func(f string, a ...any) error { return fmt.Errorf("%w: "+f, append([]any{ErrBadCheckpoint}, a...)...) }
	switch {
	case b.Body < 0 || b.Body > 1<<50:
		return bad("body of %d bytes", b.Body)
	case !nodePattern.MatchString(b.Cluster):
		return bad("cluster %q", b.Cluster)
	case b.Expires.Before(b.At):
		return bad("it expires before it was taken")
	case len(b.Groups) > MaxGroups:
		return bad("%d supplementary groups", len(b.Groups))
	}
	if _, ok := JobHome(b.Job); !ok {
		return bad("job %q", b.Job)
	}
	return nil
}

// Check refuses a file of another cluster than cluster, or past its
// expiry at now.
func (b Binding) Check(cluster string, now time.Time) error {
	if b.Cluster != cluster {
		return fmt.Errorf("%w: checkpoint of job %s was written by cluster %q, this is cluster %q (config cluster_name)", ErrCheckpointExpired, b.Job, b.Cluster, cluster)
	}
	if now.After(b.Expires) {
		return fmt.Errorf("%w: checkpoint of job %s expired at %s (taken at %s; limits.checkpoint_expiry)", ErrCheckpointExpired, b.Job,
			b.Expires.UTC().Format(time.RFC3339), b.At.UTC().Format(time.RFC3339))
	}
	return nil
}

// Matches checks that the file's binding is of the job its META and
// header describe.
func (b Binding) Matches(m CheckpointMeta, h Header) error {
	if b.Job != h.ID || b.UID != h.UID || b.GID != h.GID || !slices.Equal(b.Groups, h.Groups) || b.User != m.Job.User || !b.At.Equal(m.At) {
		return fmt.Errorf("%w: its head binds job %s of uid %d, its body is job %s of uid %d", ErrBadCheckpoint, b.Job, b.UID, h.ID, h.UID)
	}
	return nil
}

// FileSize is the size of the file whose head is head bytes long.
func (b Binding) FileSize(head int64) int64 {
	chunks := (b.Body + CheckpointChunk - 1) / CheckpointChunk
	return head + b.Body + chunks*SealSize
}

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
	// CPU is what the CPU the job's program started on offers
	// (job.Local.CPU): a restart chooses only a node whose CPU has as
	// much. Zero from an older roam: unknown, and every node fits.
	CPU cpufeat.Set `json:"cpu,omitzero"`
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
	head   []byte // the magic line and the binding's
	meta   []byte // the META line
	bind   Binding
	stream *Plan
}

// NewCheckpointPlan plans a checkpoint of meta and the stream p, bound as
// bind says (its At, and its Body, are the plan's).
func NewCheckpointPlan(bind Binding, meta CheckpointMeta, p *Plan) (*CheckpointPlan, error) {
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
	bind.At = meta.At
	bind.Body = int64(len(b)+1) + p.Size()
	if err := bind.validate(); err != nil {
		return nil, err
	}
	bl, err := json.Marshal(bind)
	if err != nil {
		return nil, err
	}
	head := fmt.Appendf(nil, "%s %d\n", CheckpointMagic, CheckpointVersion)
	head = append(append(head, bl...), '\n')
	return &CheckpointPlan{head: head, meta: append(b, '\n'), bind: bind, stream: p}, nil
}

// Size is the file's length in bytes, its seals included.
func (c *CheckpointPlan) Size() int64 { return c.bind.FileSize(int64(len(c.head)) + SealSize) }

// Binding is what the file is bound to.
func (c *CheckpointPlan) Binding() Binding { return c.bind }

// Write writes the file to w, sealed with key.
func (c *CheckpointPlan) Write(w io.Writer, key []byte, open func(path string) (io.ReadCloser, error)) error {
	mac := hmac.New(sha256.New, key)
	mac.Write(c.head)
	seal := mac.Sum(nil)
	if _, err := w.Write(append(append([]byte{}, c.head...), seal...)); err != nil {
		return err
	}
	cw := &chunkWriter{w: w, key: key, prev: seal, buf: make([]byte, 0, CheckpointChunk+SealSize)}
	if _, err := cw.Write(c.meta); err != nil {
		return err
	}
	if err := c.stream.Write(cw, open); err != nil {
		return err
	}
	if err := cw.flush(); err != nil {
		return err
	}
	if cw.n != c.bind.Body {
		return fmt.Errorf("checkpoint body of %d bytes, planned %d", cw.n, c.bind.Body)
	}
	return nil
}

// ReadHead reads a checkpoint file's head from br, checks its seal with
// key and returns its binding, the head's length, and a reader of its
// body that checks each chunk's seal as it reads it. A file of another
// format version, or whose head's seal does not match, is refused here,
// before any of its body is read.
func ReadHead(br *bufio.Reader, key []byte) (Binding, int64, *BodyReader, error) {
	magic, err := readLine(br, 64)
	var version int
	if err == nil {
		_, err = fmt.Sscanf(string(magic), CheckpointMagic+" %d\n", &version)
	}
	if err != nil {
		return Binding{}, 0, nil, fmt.Errorf("%w: not a roam checkpoint (its first line is not %q)", ErrBadCheckpoint, CheckpointMagic+" N")
	}
	if version != CheckpointVersion {
		why := ""
		if version < CheckpointVersion {
			why = ", written by an older roam: it is bound to no cluster, owner or expiry, and is not restarted; take a new checkpoint"
		}
		return Binding{}, 0, nil, fmt.Errorf("%w: format version %d (this roam reads %d)%s", ErrBadCheckpoint, version, CheckpointVersion, why)
	}
	line, err := readLine(br, maxBinding)
	if err != nil {
		return Binding{}, 0, nil, err
	}
	seal := make([]byte, SealSize)
	if _, err := io.ReadFull(br, seal); err != nil {
		return Binding{}, 0, nil, fmt.Errorf("%w: its head is cut short", ErrBadCheckpoint)
	}
	mac := hmac.New(sha256.New, key)
	mac.Write(magic)
	mac.Write(line)
	if !hmac.Equal(seal, mac.Sum(nil)) {
		return Binding{}, 0, nil, fmt.Errorf("%w: its head's seal does not match: not written by an agent of this cluster, or changed since", ErrBadCheckpoint)
	}
	var b Binding
	if err := json.Unmarshal(line, &b); err != nil {
		return Binding{}, 0, nil, fmt.Errorf("%w: binding: %v", ErrBadCheckpoint, err)
	}
	if err := b.validate(); err != nil {
		return Binding{}, 0, nil, err
	}
	head := int64(len(magic) + len(line) + SealSize)
	return b, head, &BodyReader{r: br, key: key, prev: seal, left: b.Body, raw: make([]byte, CheckpointChunk+SealSize)}, nil
}

// ReadBody reads a checkpoint body's META and stream header from br (a
// BodyReader's); the archive follows in br.
func ReadBody(br *bufio.Reader) (CheckpointMeta, Header, error) {
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

// ReadCheckpoint reads a whole checkpoint's head, META and stream header
// from r, checked with key; the archive follows in the reader it returns,
// whose chunks are checked as they are read.
func ReadCheckpoint(r io.Reader, key []byte) (Binding, CheckpointMeta, Header, *bufio.Reader, error) {
	b, _, body, err := ReadHead(bufio.NewReader(r), key)
	if err != nil {
		return Binding{}, CheckpointMeta{}, Header{}, nil, err
	}
	br := bufio.NewReaderSize(body, 1<<20)
	m, h, err := ReadBody(br)
	if err == nil {
		err = b.Matches(m, h)
	}
	return b, m, h, br, err
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
