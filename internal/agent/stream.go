package agent

// Streamed eager migration: the source's CRIU dump writes the memory pages
// straight to a CRIU page server on the destination, while it dumps, so
// that the copy overlaps the dump and no page is written to the source's
// disk or read back. Only the small images (registers, files, mappings)
// and the spool files follow in the migration stream. CRIU talks to each
// agent over a Unix socket pair, and the agents carry the bytes over the
// peer TLS port (/v1/peer/pages).

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"roam/internal/ckpt"
	"roam/internal/errkind"
	"roam/internal/migrate"
)

// pageSink is the destination's CRIU page server for one migration.
type pageSink struct {
	mid       string
	conn      net.Conn // the agent's end of the page server's socket, until taken
	dir       string   // the images directory the migration restores from
	done      chan struct{}
	err       error // how the page server ended, once done
	connected atomic.Bool
	cmd       *exec.Cmd
}

// openSink starts a CRIU page server that writes into a new images
// directory for migration mid, reading from a socket the agent feeds.
func (a *Agent) openSink(mid string) (*pageSink, error) {
	if !migrate.ValidMID(mid) {
		return nil, errkind.New(ErrBadRequest, "page sink: mid %q", mid)
	}
	dir := filepath.Join(a.imageDir, "in-"+mid)
	a.jobs.mu.Lock()
	_, dup := a.migr.sinks[mid]
	a.jobs.mu.Unlock()
	if dup {
		return nil, errkind.New(ErrBadRequest, "page sink for migration %s exists", mid)
	}
	os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("images directory: %w", err)
	}
	ours, theirs, err := socketPair()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &pageSink{mid: mid, conn: ours, dir: dir, done: make(chan struct{})}
	s.cmd = exec.Command(a.criu.Path, "page-server", "--ps-socket", "3", "-D", dir, "-o", "page-server.log", "-v4")
	s.cmd.ExtraFiles = []*os.File{theirs}
	a.execMu.Lock()
	err = s.cmd.Start()
	a.execMu.Unlock()
	theirs.Close()
	if err != nil {
		ours.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("criu page-server: %w", err)
	}
	go func() {
		if err := s.cmd.Wait(); err != nil {
			s.err = fmt.Errorf("criu page-server: %s", ckpt.LogError(filepath.Join(dir, "page-server.log"), err))
		}
		close(s.done)
	}()
	a.jobs.mu.Lock()
	if a.migr.sinks == nil {
		a.migr.sinks = map[string]*pageSink{}
	}
	a.migr.sinks[mid] = s
	a.jobs.mu.Unlock()
	return s, nil
}

// socketPair returns a connected pair of Unix stream sockets: one as a
// net.Conn for the agent, one as a file for CRIU.
func socketPair() (net.Conn, *os.File, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socket pair: %w", err)
	}
	f := os.NewFile(uintptr(fds[0]), "page-socket")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		syscall.Close(fds[1])
		return nil, nil, err
	}
	return c, os.NewFile(uintptr(fds[1]), "criu-page-socket"), nil
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
		return nil, errkind.New(ErrBadRequest, "no page stream for migration %s on node %s", mid, a.cfg.NodeID)
	}
	select {
	case <-s.done:
	case <-time.After(stallTimeout):
		_ = s.cmd.Process.Kill()
		<-s.done
		os.RemoveAll(s.dir)
		return nil, errors.New("criu page-server still running after the dump ended")
	}
	if s.err != nil {
		os.RemoveAll(s.dir)
		return nil, s.err
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
	case <-s.done:
	case <-time.After(time.Second):
		return ""
	}
	if s.err == nil {
		return ""
	}
	return s.err.Error()
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
	if s.conn != nil {
		s.conn.Close()
	}
	_ = s.cmd.Process.Kill()
	<-s.done
	os.RemoveAll(s.dir)
}

// streamedDump dumps the job with its pages going, as they are dumped,
// to the destination's page sink for migration mid; it returns the bytes
// carried (the destination opened the sink when the source checked).
// A stream that makes no progress for stallTimeout is cut, which
// fails the dump.
func (a *Agent) streamedDump(addr, mid string, pid int, dir string, mounts []string) (int64, error) {
	remote, err := a.dialPeerStream(addr, "/v1/peer/pages?mid="+mid)
	if err != nil {
		return 0, fmt.Errorf("page stream to the destination: %w", err)
	}
	ours, theirs, err := socketPair()
	if err != nil {
		remote.Close()
		return 0, err
	}
	var bytes, progress atomic.Int64
	progress.Store(time.Now().UnixNano())
	spliced := make(chan struct{})
	go func() {
		splice(ours, remote, &countingReader{r: ours, n: &bytes, last: &progress}, nil)
		close(spliced)
	}()
	done := make(chan error, 1)
	go func() {
		err := a.criu.Dump(ckpt.DumpOpts{PID: pid, Dir: dir, Mounts: mounts, PageConn: theirs})
		if err != nil {
			// The destination's side of a failed stream says more (its
			// disk is full, say) than the dump's broken pipe.
			var st struct {
				Error string `json:"error"`
			}
			if a.peerCallAddr(addr, "GET", "/v1/peer/migrate/sink?mid="+mid, nil, &st) == nil && st.Error != "" {
				err = fmt.Errorf("destination: %s; %w", st.Error, err)
			}
		}
		done <- err
	}()
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case err := <-done:
			theirs.Close()
			if err != nil {
				ours.Close()
				remote.Close()
			}
			// The destination closes its end once its page server has
			// ended; do not wait on a peer that never does.
			select {
			case <-spliced:
			case <-time.After(stallTimeout):
				ours.Close()
				remote.Close()
				<-spliced
			}
			return bytes.Load(), err
		case <-t.C:
			if time.Since(time.Unix(0, progress.Load())) > stallTimeout {
				ours.Close()
				remote.Close()
				err := <-done
				theirs.Close()
				<-spliced
				return bytes.Load(), fmt.Errorf("page stream stalled after %d bytes (no progress for %s): %v", bytes.Load(), stallTimeout, err)
			}
		}
	}
}

// countingReader counts the bytes read and when the last came.
type countingReader struct {
	r    interface{ Read([]byte) (int, error) }
	n    *atomic.Int64
	last *atomic.Int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	k, err := c.r.Read(b)
	if k > 0 {
		c.n.Add(int64(k))
		c.last.Store(time.Now().UnixNano())
	}
	return k, err
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
	case <-s.done:
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
