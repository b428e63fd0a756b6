package agent

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
	"path/filepath"
	"sync/atomic"
	"time"

	"roam/internal/agent/peer"
	"roam/internal/agent/phases"
	"roam/internal/agent/stall"
	"roam/internal/ckpt"
	"roam/internal/errkind"
	"roam/internal/migrate"
)

// pageSink is the destination's page server for one migration.
type pageSink struct {
	ckpt.Sink
	mid       string
	conn      net.Conn // the page server's end, until taken
	dir       string   // the images directory the migration restores from
	connected atomic.Bool
}

// openSink starts a page server that writes into a new images directory
// for migration mid.
func (a *Agent) openSink(mid string) (*pageSink, error) {
	if !migrate.ValidMID(mid) {
		return nil, errkind.New(peer.ErrBadRequest, "page sink: mid %q", mid)
	}
	dir := filepath.Join(a.imageDir, "in-"+mid)
	a.jobs.mu.Lock()
	_, dup := a.migr.sinks[mid]
	a.jobs.mu.Unlock()
	if dup {
		return nil, errkind.New(peer.ErrBadRequest, "page sink for migration %s exists", mid)
	}
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("images directory: %w", err)
	}
	cs, err := a.ckpt.Sink(dir)
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &pageSink{Sink: cs, mid: mid, conn: cs.Conn(), dir: dir}
	a.jobs.mu.Lock()
	if a.migr.sinks == nil {
		a.migr.sinks = map[string]*pageSink{}
	}
	a.migr.sinks[mid] = s
	a.jobs.mu.Unlock()
	return s, nil
}

// takeSinkConn gives the sink's socket to the one connection that carries
// the dump's pages.
func (a *Agent) takeSinkConn(mid string) net.Conn {
	a.jobs.mu.Lock()
	defer a.jobs.mu.Unlock()
	s := a.migr.sinks[mid]
	if s == nil || s.conn == nil {
		return nil
	}
	c := s.conn
	s.conn = nil
	s.connected.Store(true)
	return c
}

// claimSink hands migration mid's pages to its restore, once the page
// server has written them all.
func (a *Agent) claimSink(mid string) (*pageSink, error) {
	a.jobs.mu.Lock()
	s := a.migr.sinks[mid]
	delete(a.migr.sinks, mid)
	a.jobs.mu.Unlock()
	if s == nil {
		return nil, errkind.New(peer.ErrBadRequest, "no page stream for migration %s on node %s", mid, a.cfg.NodeID)
	}
	select {
	case <-s.Done():
	case <-time.After(stallTimeout):
		s.Stop()
		os.RemoveAll(s.dir)
		return nil, errors.New("page server still running after the dump ended")
	}
	if err := s.Err(); err != nil {
		os.RemoveAll(s.dir)
		return nil, err
	}
	return s, nil
}

// sinkError is how migration mid's page server failed, waiting for it to
// end at most a second: "" when it did not fail or is unknown.
func (a *Agent) sinkError(mid string) string {
	a.jobs.mu.Lock()
	s := a.migr.sinks[mid]
	a.jobs.mu.Unlock()
	if s == nil {
		return ""
	}
	select {
	case <-s.Done():
	case <-time.After(time.Second):
		return ""
	}
	if err := s.Err(); err != nil {
		return err.Error()
	}
	return ""
}

// dropSink stops and removes migration mid's sink, if it is still here.
func (a *Agent) dropSink(mid string) {
	a.jobs.mu.Lock()
	s := a.migr.sinks[mid]
	delete(a.migr.sinks, mid)
	a.jobs.mu.Unlock()
	if s == nil {
		return
	}
	s.Stop()
	os.RemoveAll(s.dir)
}

// streamedDump dumps the job with its pages going, as they are dumped,
// to the destination's page sink for migration mid; it returns the bytes
// carried (the destination opened the sink when the source checked). A
// stream that makes no progress for stallTimeout is cut, which fails the
// dump.
func (a *Agent) streamedDump(addr, mid string, pid int, dir string, mounts []string, ph *phases.Log) (int64, error) {
	t := time.Now()
	remote, err := a.dialPeerStream(addr, peer.Pages+"?mid="+mid)
	ph.Add("page stream", t)
	if err != nil {
		return 0, fmt.Errorf("page stream to the destination: %w", err)
	}
	g := stall.Guard(remote, stallTimeout)
	defer g.Watchdog().Stop()
	times, err := a.ckpt.Dump(pid, dir, mounts, g)
	ph.AddTimes(times, false)
	n := g.Written()
	switch {
	case err != nil && g.Watchdog().Stalled():
		return n, fmt.Errorf("page stream stalled after %d bytes (no progress for %s): %v", n, stallTimeout, err)
	case err != nil:
		// The destination's side of a failed stream says more (its
		// disk is full, say) than the dump's broken pipe.
		var st struct {
			Error string `json:"error"`
		}
		if a.peers.CallAddr(addr, "GET", peer.MigrateSink+"?mid="+mid, nil, &st) == nil && st.Error != "" {
			err = fmt.Errorf("destination: %s; %w", st.Error, err)
		}
	}
	return n, err
}

// sinkBusy says whether the page sink of an offered migration has a dump
// connected whose page server still runs: its timer (the machine's
// SinkWait) then waits another SinkWait instead of ending the migration
// under the dump. A sink no dump connected to, or whose pages no stream
// claimed, ends when the timer finds it idle.
func (a *Agent) sinkBusy(in *inMig) bool {
	a.jobs.mu.Lock()
	s := a.migr.sinks[in.mid]
	a.jobs.mu.Unlock()
	if s == nil || !s.connected.Load() {
		return false
	}
	select {
	case <-s.Done():
		return false
	default:
	}
	go func() {
		in.mu.Lock()
		defer in.mu.Unlock()
		a.wakeIn(in, time.Now().Add(migrate.SinkWait))
	}()
	return true
}
