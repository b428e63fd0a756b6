package agent

// A migration's I/O that is not CRIU's: the stream of header and archive
// (format in package migrate), the destination's checks, and reading a
// job's descriptors for the pin rules (rules in package migrate).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"roam/internal/api"
	"roam/internal/ckpt"
	"roam/internal/errkind"
	"roam/internal/migrate"
)

// progressWriter counts bytes and the time of the last progress.
type progressWriter struct {
	w    io.Writer
	n    int64
	last chan struct{}
}

func (p *progressWriter) Write(b []byte) (int, error) {
	n, err := p.w.Write(b)
	p.n += int64(n)
	select {
	case p.last <- struct{}{}:
	default:
	}
	return n, err
}

// streamFiles lists the regular files of the images and spool directories
// for the stream.
func streamFiles(images, spool string) ([]migrate.File, error) {
	var out []migrate.File
	for _, part := range []struct{ prefix, dir string }{{migrate.DirImages + "/", images}, {migrate.DirSpool + "/", spool}} {
		ents, err := os.ReadDir(part.dir)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if !e.Type().IsRegular() {
				continue
			}
			fi, err := e.Info()
			if err != nil {
				return nil, err
			}
			out = append(out, migrate.File{Name: part.prefix + e.Name(), Path: filepath.Join(part.dir, e.Name()), Size: fi.Size()})
		}
	}
	return out, nil
}

func openFile(path string) (io.ReadCloser, error) { return os.Open(path) }

// sendImages streams the header, the images and the spool files to the
// destination, and waits for its "ready": a restored, stopped copy.
func (a *Agent) sendImages(addr string, hdr migrate.Header, images, spool string) (int64, float64, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	files, err := streamFiles(images, spool)
	if err != nil {
		return 0, 0, err
	}
	plan, err := migrate.NewPlan(hdr, files)
	if err != nil {
		return 0, 0, err
	}
	pr, pw := io.Pipe()
	pw2 := &progressWriter{w: pw, last: make(chan struct{}, 1)}
	sent := make(chan error, 1)
	go func() {
		err := plan.Write(pw2, openFile)
		pw.CloseWithError(err)
		sent <- err
	}()
	// Watchdog: no progress for stallTimeout while sending, or no answer
	// within restoreTimeout after, ends the transfer.
	var stalled atomic.Bool
	go func() {
		t := time.NewTimer(stallTimeout)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-pw2.last:
				t.Reset(stallTimeout)
			case err := <-sent:
				if err != nil {
					cancel()
					return
				}
				t.Reset(restoreTimeout)
				sent = nil
			case <-t.C:
				stalled.Store(true)
				cancel()
				return
			}
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "https://"+addr+"/v1/peer/migrate", pr)
	if err != nil {
		return 0, 0, err
	}
	req.ContentLength = plan.Size()
	var ready migrateReady
	err = api.Exchange(a.peerHTTP, req, &ready)
	if stalled.Load() && err != nil {
		return pw2.n, 0, fmt.Errorf("transfer stalled after %d bytes (no progress for %s): %v", pw2.n, stallTimeout, err)
	}
	var te *api.TransportError
	var re *api.RemoteError
	switch {
	case errors.As(err, &te):
		return pw2.n, 0, te.Err
	case errors.As(err, &re):
		return pw2.n, 0, errors.New(re.Msg)
	}
	return pw2.n, ready.RestoreMS, err
}

// migrateReady is the destination's answer: a stopped copy is restored.
type migrateReady struct {
	RestoreMS float64 `json:"restore_ms"`
}

// checkFiles says whether this node reaches a job's open files: every
// path must exist here.
func (a *Agent) checkFiles(paths []string) error {
	for _, p := range paths {
		if !filepath.IsAbs(p) {
			return errkind.New(ErrBadRequest, "file path %q is not absolute", p)
		}
		if _, err := os.Stat(p); err != nil {
			return errkind.New(ErrPinned, "open file %s is not reachable on node %s", p, a.cfg.NodeID)
		}
	}
	return nil
}

// readArchive extracts a migration's archive: img/NAME into images,
// spool/NAME into spool, each a new file.
func readArchive(r io.Reader, images, spool string) error {
	err := migrate.ReadArchive(r, func(dir, name string) (io.WriteCloser, error) {
		base := images
		if dir == migrate.DirSpool {
			base = spool
		}
		dst := filepath.Join(base, name)
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return nil, fmt.Errorf("write image %s: %w", dst, err)
		}
		return f, nil
	})
	if errors.Is(err, migrate.ErrBadArchive) {
		return errkind.New(ErrBadRequest, "%v", err)
	}
	return err
}

// restoreCgroups is where CRIU restores a job: in this node's memory
// cgroup, so its pages are charged there from the start, but (cgroup v1)
// in CRIU's own CPU cgroup, so that no CPU quota slows the restore; the
// job moves into the node's CPU cgroup while it is still stopped. Under
// v2, where one cgroup holds both, it goes straight into the node's.
func (a *Agent) restoreCgroups() map[string]string {
	if a.cfg.Cgroup == "" {
		return nil
	}
	rel := "/" + strings.TrimPrefix(a.cfg.Cgroup, "/")
	if a.probe.Layout.V2 {
		return map[string]string{"": rel}
	}
	return map[string]string{"memory": rel, "cpu": "/"}
}

// inspectJob reads the descriptors of a job's processes and its TCP table
// and applies the pin rules (migrate.Pins): the regular files the
// destination must reach, or why the job cannot move.
func inspectJob(tree []int, members map[string]bool) (files []string, reason string) {
	var fds []migrate.FD
	for _, p := range tree {
		dir := "/proc/" + strconv.Itoa(p) + "/fd/"
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			l, err := os.Readlink(dir + e.Name())
			if err != nil {
				continue
			}
			fd := migrate.FD{Link: l}
			if strings.HasPrefix(l, "/dev/") {
				var st syscall.Stat_t
				if syscall.Stat(dir+e.Name(), &st) == nil {
					fd.Device = st.Mode&syscall.S_IFMT == syscall.S_IFCHR || st.Mode&syscall.S_IFMT == syscall.S_IFBLK
				}
			}
			fds = append(fds, fd)
		}
	}
	var conns []migrate.TCPConn
	if len(tree) > 0 && len(migrate.Sockets(fds)) > 0 {
		for _, f := range []string{"tcp", "tcp6"} {
			if b, err := os.ReadFile("/proc/" + strconv.Itoa(tree[0]) + "/net/" + f); err == nil {
				conns = append(conns, migrate.EstablishedTCP(string(b))...)
			}
		}
	}
	return migrate.Pins(fds, conns, ckpt.JobDir, members)
}
