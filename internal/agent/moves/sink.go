package moves

// Streamed eager migration: the source's dump writes the memory pages
// straight to a page sink on the destination, while it dumps, so that the
// copy overlaps the dump and no page is written to the source's disk or
// read back. Only the small images (registers, files, mappings) and the
// spool files follow in the migration stream.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"time"

	"roam/internal/ckpt"
)

// Sink is the destination's page server for one migration.
type Sink struct {
	ckpt.Sink
	mid       string
	dir       string   // the images directory the migration restores from
	conn      net.Conn // the page server's end, until taken (the table's lock)
	connected atomic.Bool
}

// NewSink makes dir anew and starts a page server (open, the
// checkpointer's) writing into it for migration mid; the caller lists it
// (Table.OpenSink).
func NewSink(mid, dir string, open func(dir string) (ckpt.Sink, error)) (*Sink, error) {
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("images directory: %w", err)
	}
	cs, err := open(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return &Sink{Sink: cs, mid: mid, conn: cs.Conn(), dir: dir}, nil
}

// Dir is the images directory the sink writes the pages into.
func (s *Sink) Dir() string { return s.dir }

// Wait returns once the page server has written every page, waiting at
// most limit; a server that failed or still runs is ended and its
// directory removed.
func (s *Sink) Wait(limit time.Duration) error {
	select {
	case <-s.Done():
	case <-time.After(limit):
		s.drop()
		return errors.New("page server still running after the dump ended")
	}
	if err := s.Err(); err != nil {
		os.RemoveAll(s.dir)
		return err
	}
	return nil
}

// Busy says whether a dump is connected and the page server still runs.
func (s *Sink) Busy() bool {
	if !s.connected.Load() {
		return false
	}
	select {
	case <-s.Done():
		return false
	default:
		return true
	}
}

// Failure is how the page server failed, waiting for it to end at most
// limit: "" when it did not fail or has not ended.
func (s *Sink) Failure(limit time.Duration) string {
	select {
	case <-s.Done():
	case <-time.After(limit):
		return ""
	}
	if err := s.Err(); err != nil {
		return err.Error()
	}
	return ""
}

// drop stops the page server and removes its directory.
func (s *Sink) drop() {
	s.Stop()
	os.RemoveAll(s.dir)
}
