package migrate

import (
	"archive/tar"
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// The migration stream: the header as one JSON line, then a tar archive
// (USTAR, regular files, and FIFOs in the spool) with CRIU's images under
// img/ and the job's spool files under spool/. The stream is planned before it is sent, so
// its length is known and the body goes out without HTTP chunking.

// Archive directories.
const (
	DirImages = "img"
	DirSpool  = "spool"
)

// ErrBadArchive is the kind of every archive error.
var ErrBadArchive = errors.New("bad migration archive")

// File is one file of a stream: its archive name (DIR/NAME), where the
// driver reads it, and its size when planned.
type File struct {
	Name, Path string
	Size       int64
	// FIFO: a named FIFO of the job's own directory (no content: CRIU's
	// images hold the bytes buffered in it).
	FIFO bool
}

// Plan is a migration stream planned to be sent.
type Plan struct {
	head  []byte
	files []File
}

// NewPlan plans a stream of the header and the files.
func NewPlan(h Header, files []File) (*Plan, error) {
	b, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	// The destination reads no longer line (ReadHeader): refused here,
	// before anything is sent.
	if len(b)+1 > MaxHeader {
		return nil, fmt.Errorf("migration header of %d bytes: more than %d", len(b)+1, MaxHeader)
	}
	for _, f := range files {
		if len(f.Name) >= 100 {
			return nil, fmt.Errorf("image name too long: %s", f.Name)
		}
		if f.FIFO && (f.Size != 0 || !strings.HasPrefix(f.Name, DirSpool+"/")) {
			return nil, fmt.Errorf("FIFO %s: not an empty spool entry", f.Name)
		}
	}
	return &Plan{head: append(b, '\n'), files: files}, nil
}

// Size is the stream's length in bytes: the header line, a 512-byte tar
// header and the padded content per file (names are short, so no PAX
// records), and tar's two closing blocks.
func (p *Plan) Size() int64 {
	n := int64(len(p.head)) + 1024
	for _, f := range p.files {
		n += 512 + (f.Size+511)/512*512
	}
	return n
}

// Write writes the stream to w, reading each file through open. A file
// that changed size since it was planned fails the stream (the job is
// frozen, so none should).
func (p *Plan) Write(w io.Writer, open func(path string) (io.ReadCloser, error)) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	if _, err := bw.Write(p.head); err != nil {
		return err
	}
	tw := tar.NewWriter(bw)
	for _, f := range p.files {
		if err := addFile(tw, f, open); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

func addFile(tw *tar.Writer, f File, open func(string) (io.ReadCloser, error)) error {
	if f.FIFO {
		return tw.WriteHeader(&tar.Header{Name: f.Name, Mode: 0o600, Typeflag: tar.TypeFifo, Format: tar.FormatUSTAR})
	}
	r, err := open(f.Path)
	if err != nil {
		return err
	}
	defer r.Close()
	if err := tw.WriteHeader(&tar.Header{Name: f.Name, Mode: 0o600, Size: f.Size, Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}); err != nil {
		return err
	}
	_, err = io.CopyN(tw, r, f.Size)
	return err
}

// ReadHeader reads and validates a stream's header line from br, whatever
// br's buffer size: a line of up to MaxHeader bytes is read whole.
func ReadHeader(br *bufio.Reader) (Header, error) {
	var line []byte
	for {
		part, err := br.ReadSlice('\n')
		if len(line)+len(part) > MaxHeader {
			return Header{}, fmt.Errorf("%w: too long", ErrBadHeader)
		}
		line = append(line, part...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			return Header{}, fmt.Errorf("%w: %v", ErrBadHeader, err)
		}
		break
	}
	// JSON is UTF-8; Go's decoder would read each stray byte as U+FFFD,
	// a path that is not the sender's (and three bytes where it had one).
	if !utf8.Valid(line) {
		return Header{}, fmt.Errorf("%w: not UTF-8", ErrBadHeader)
	}
	var h Header
	if err := json.Unmarshal(line, &h); err != nil {
		return Header{}, fmt.Errorf("%w: %v", ErrBadHeader, err)
	}
	return h, h.Validate()
}

// ReadArchive extracts a stream's archive: each entry DIR/NAME goes to
// create(DIR, NAME, false), which must create a new file (never follow or
// reuse one); a FIFO to create(DIR, NAME, true), which must make a new
// FIFO and returns no writer. Only img/ and spool/ entries, regular files
// (and FIFOs in spool/), and no NAME with a slash, "." or "..", are
// accepted.
func ReadArchive(r io.Reader, create func(dir, name string, fifo bool) (io.WriteCloser, error)) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: %v", ErrBadArchive, err)
		}
		dir, name, ok := strings.Cut(h.Name, "/")
		fifo := h.Typeflag == tar.TypeFifo && dir == DirSpool && h.Size == 0
		if !ok || name == "" || strings.Contains(name, "/") || name == "." || name == ".." ||
			(h.Typeflag != tar.TypeReg && !fifo) || (dir != DirImages && dir != DirSpool) {
			return fmt.Errorf("%w: entry %q", ErrBadArchive, h.Name)
		}
		if fifo {
			if _, err := create(dir, name, true); err != nil {
				return err
			}
			continue
		}
		// A sparse entry (GNU or PAX) expands holes to zeros: a few bytes
		// of archive could fill the disk. Plan.Write makes none.
		if sparse(h) {
			return fmt.Errorf("%w: entry %q is sparse", ErrBadArchive, h.Name)
		}
		w, err := create(dir, name, false)
		if err != nil {
			return err
		}
		_, err = io.Copy(w, tr)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write %s/%s: %w", dir, name, err)
		}
	}
}

// sparse says whether an entry's data has holes the reader fills in.
func sparse(h *tar.Header) bool {
	if h.Typeflag == tar.TypeGNUSparse {
		return true
	}
	for k := range h.PAXRecords {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return true
		}
	}
	return false
}
