package migrate

// A checkpoint body's sealed chunks (checkpoint.go): the writer that cuts
// and seals them, the reader that checks and joins them.

import (
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
)

// chunkWriter cuts what is written into chunks of CheckpointChunk bytes,
// each written followed by its seal; flush ends the last.
type chunkWriter struct {
	w    io.Writer
	key  []byte
	prev []byte // the seal before the next chunk's
	buf  []byte
	n    int64 // body bytes written
}

func (c *chunkWriter) Write(p []byte) (int, error) {
	done := 0
	for len(p) > 0 {
		k := min(len(p), CheckpointChunk-len(c.buf))
		c.buf = append(c.buf, p[:k]...)
		p, done = p[k:], done+k
		if len(c.buf) == CheckpointChunk {
			if err := c.flush(); err != nil {
				return done, err
			}
		}
	}
	return done, nil
}

// flush writes the chunk begun, if any, and its seal.
func (c *chunkWriter) flush() error {
	if len(c.buf) == 0 {
		return nil
	}
	c.prev = chunkSeal(c.key, c.prev, c.buf)
	c.n += int64(len(c.buf))
	_, err := c.w.Write(append(c.buf, c.prev...))
	c.buf = c.buf[:0]
	return err
}

func chunkSeal(key, prev, chunk []byte) []byte {
	mac := hmac.New(sha256.New, key)
	mac.Write(prev)
	mac.Write(chunk)
	return mac.Sum(nil)
}

// BodyReader reads a checkpoint's body: it reads each chunk and its seal
// whole, checks the seal, and only then hands the chunk on, so nothing
// of a chunk that does not match is ever read as the body. After the
// body's last byte it reads nothing more.
type BodyReader struct {
	r     io.Reader
	key   []byte
	prev  []byte
	left  int64 // the body's bytes not yet read from r
	raw   []byte
	buf   []byte // the current chunk, checked
	chunk int
	err   error
}

func (b *BodyReader) Read(p []byte) (int, error) {
	for len(b.buf) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		if b.left == 0 {
			return 0, io.EOF
		}
		b.err = b.next()
	}
	n := copy(p, b.buf)
	b.buf = b.buf[n:]
	return n, nil
}

// next reads and checks the next chunk.
func (b *BodyReader) next() error {
	n := int(min(int64(CheckpointChunk), b.left))
	raw := b.raw[:n+SealSize]
	if _, err := io.ReadFull(b.r, raw); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("%w: shorter than its head says", ErrBadCheckpoint)
		}
		return err
	}
	b.chunk++
	seal := chunkSeal(b.key, b.prev, raw[:n])
	if !hmac.Equal(seal, raw[n:]) {
		return fmt.Errorf("%w: chunk %d: its seal does not match: not written by an agent of this cluster, or changed since", ErrBadCheckpoint, b.chunk)
	}
	b.prev, b.buf, b.left = seal, raw[:n], b.left-int64(n)
	return nil
}
