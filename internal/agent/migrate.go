package agent

// Live migration of a running job to another node (MOSIX's preemptive
// migration, Kerrighed's process extraction), with CRIU.
//
// The source dumps the job and leaves it stopped, then streams the images
// and the job's spool files to the destination over the peer TLS port. The
// destination restores it, still stopped, in its own cgroup and in the
// job's own PID namespace, and answers "ready". Only then does the source
// kill its stopped copy and tell the destination to resume ("commit"). Any
// failure before that resumes the source copy: there is never more than one
// running copy, and never none, except in the short window between the
// source's kill and the commit, should the destination die in it (see
// docs/architecture.md).

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"roam/internal/api"
	"roam/internal/ckpt"
	"roam/internal/errkind"
	"roam/internal/job"
	"roam/internal/procfs"
)

const (
	// stallTimeout ends a transfer that makes no progress this long (a
	// link down, a peer gone).
	stallTimeout = 5 * time.Second
	// restoreTimeout bounds the wait for the destination's "ready" once
	// all bytes are sent.
	restoreTimeout = 60 * time.Second
	// commitWait is how long a destination waits for the commit before it
	// asks the source how the migration ended.
	commitWait = 15 * time.Second
	// migrateTimeout bounds a whole migration asked of another node.
	migrateTimeout = 15 * time.Minute
	// maxHeader bounds a migration's header line.
	maxHeader = 1 << 20
)

// ErrPinned means the job cannot migrate; the message says why.
var ErrPinned = errors.New("pinned")

// migrateHeader is the first line of a migration stream.
type migrateHeader struct {
	MID      string   `json:"mid"`
	From     string   `json:"from"`
	ID       string   `json:"id"`
	Home     string   `json:"home"`
	HomeAddr string   `json:"home_addr"`
	AckOut   int64    `json:"ack_out"`
	AckErr   int64    `json:"ack_err"`
	Mounts   []string `json:"mounts"`
	// Lazy: the images hold no memory pages; the destination fetches them
	// through /v1/peer/pages from the source's CRIU page server.
	Lazy bool `json:"lazy,omitempty"`
	// Streamed: the dump wrote its pages to this node's page sink for
	// the migration (/v1/peer/migrate/sink); the stream has the rest.
	Streamed bool `json:"streamed,omitempty"`
	// What the scheduler needs of the job: when it started, why no policy
	// may move it, and its moves so far (this one not counted).
	Started   time.Time `json:"started"`
	Hold      string    `json:"hold,omitempty"`
	Moves     int       `json:"moves,omitempty"`
	LastMoved time.Time `json:"last_moved"`
	// StdinKey is the job's stdin pipe ("pipe:[INODE]") when the user's
	// stdin still flows to it: the destination re-attaches a new pipe.
	StdinKey string `json:"stdin_key,omitempty"`
}

// migrationState is the agent's migrations in flight.
type migrationState struct {
	// outcome of this node's outgoing migrations, by id, for a destination
	// that missed the commit: "pending", "committed" or "aborted".
	outcome map[string]string
	// incoming restored copies waiting for their commit, by id.
	incoming map[string]*incoming
	// movedTo says where a job that left this node went, so a signal or
	// stdin sent here by a stale record still arrives.
	movedTo map[string]string
	// lazy dumps serving pages, by migration id.
	lazy map[string]*lazyDump
	// sinks: CRIU page servers taking streamed dumps' pages, by migration
	// id.
	sinks map[string]*pageSink
}

// incoming is a restored, stopped copy on the destination.
type incoming struct {
	hdr    migrateHeader
	pid    int
	tix    uint64
	spool  string
	images string
	stdin  *os.File
	done   chan struct{} // closed on commit or abort
	// lazyDone, for a lazy migration, is closed when the lazy-pages
	// daemon has ended (all pages fetched, or failed).
	lazyDone chan struct{}
}

var (
	midPattern     = regexp.MustCompile(`^[0-9a-f]{16}$`)
	pipeKeyPattern = regexp.MustCompile(`^pipe:\[[0-9]+\]$`)
)

// Migrate is `roam migrate`: it moves a running job to another node, or
// hands it back to the automatic policies ("auto").
func (a *Agent) Migrate(c Caller, req api.MigrateRequest) (job.Migration, error) {
	rec, err := a.record(req.ID)
	if err != nil {
		return job.Migration{}, err
	}
	if !canTouch(c, rec.UID) {
		return job.Migration{}, errkind.New(ErrPermission, "%s: permission denied", req.ID)
	}
	if req.Node == "auto" {
		if rec.Pin {
			return job.Migration{}, errkind.New(ErrPinned, "%s: pinned by roam run --pin", rec.ID)
		}
		if rec.State == job.StateRunning {
			// Its current node holds it back from the policies; let go.
			if err := a.peerCall(rec.Node, http.MethodPost, "/v1/peer/hold?id="+rec.ID, nil, nil); err != nil {
				return job.Migration{}, fmt.Errorf("node %s: %w", rec.Node, err)
			}
		}
		return job.Migration{}, a.noteHome(rec.Home, jobNote{ID: rec.ID, Manual: new(bool)})
	}
	to := req.Node
	if to == "home" {
		to = rec.Home
	}
	switch {
	case rec.State != job.StateRunning:
		return job.Migration{}, errkind.New(ErrBadRequest, "%s: job is %s, not running", rec.ID, rec.State)
	case rec.Pin:
		return job.Migration{}, errkind.New(ErrPinned, "%s: pinned by roam run --pin", rec.ID)
	case to == rec.Node:
		return job.Migration{}, errkind.New(ErrBadRequest, "%s: already on node %s", rec.ID, to)
	}
	if !a.isAlive(to) {
		return job.Migration{}, errkind.New(ErrNotFound, "node %s is not a live member of the cluster", to)
	}
	out := migrateOutRequest{ID: rec.ID, To: to, Lazy: req.Lazy, Manual: true}
	if rec.Node == a.cfg.NodeID {
		return a.migrateOut(out)
	}
	var m job.Migration
	err = a.peerCallWithin(migrateTimeout, rec.Node, http.MethodPost, "/v1/peer/migrate-out", out, &m)
	return m, err
}

type migrateOutRequest struct {
	ID string `json:"id"`
	To string `json:"to"`
	// Why is the policy's reason; empty for `roam migrate`.
	Why    string `json:"why,omitempty"`
	Lazy   bool   `json:"lazy,omitempty"`
	Manual bool   `json:"manual,omitempty"`
}

func (a *Agent) isAlive(node string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	p := a.known[node]
	return p != nil && p.alive
}

// migrateOut moves a job running here to req.To, and tells its home node
// how it went. The returned migration has OK false, and err says why, when
// it failed; the job then still runs here.
func (a *Agent) migrateOut(req migrateOutRequest) (job.Migration, error) {
	start := time.Now()
	m := job.Migration{At: start, From: a.cfg.NodeID, To: req.To, Lazy: req.Lazy, Why: req.Why}
	if m.Why == "" {
		m.Why = "roam migrate"
	}
	lj, err := a.claimForMigration(req.ID)
	if err != nil {
		return m, err
	}
	mid := newMID()
	a.setOutcome(mid, "pending")
	moved := false
	defer func() {
		a.jobs.mu.Lock()
		lj.migrating = false
		a.jobs.mu.Unlock()
		if !moved {
			a.setOutcome(mid, "aborted")
			a.kickPusher()
		}
	}()
	err = a.transfer(mid, lj, req, &m)
	m.TotalMS = msSince(start)
	if err == nil {
		moved = true
		m.OK = true
	} else {
		m.Error = err.Error()
	}
	a.metrics.observe(m)
	note := jobNote{ID: req.ID, Migration: &m}
	if m.OK {
		note.Node = req.To
		if req.Manual {
			note.Manual = &req.Manual
		}
	}
	if errors.Is(err, ErrPinned) {
		note.PinReason = strings.TrimPrefix(err.Error(), req.ID+": ")
	}
	if nerr := a.noteHome(lj.rec.Home, note); nerr != nil {
		a.log.Warn("tell home about migration", "job", req.ID, "err", nerr)
	}
	a.log.Info("migration", "job", req.ID, "to", req.To, "ok", m.OK, "bytes", m.Bytes,
		"freeze_ms", m.FreezeMS, "total_ms", m.TotalMS, "err", m.Error)
	return m, err
}

// claimForMigration marks a local job as migrating, so only one migration
// runs at a time and the push loop leaves it alone meanwhile.
func (a *Agent) claimForMigration(id string) (*localJob, error) {
	a.jobs.mu.Lock()
	defer a.jobs.mu.Unlock()
	lj := a.jobs.local[id]
	switch {
	case lj == nil || !job.Alive(lj.rec.PID, lj.rec.StartTix):
		return nil, errkind.New(ErrNotFound, "job %s is not running on node %s", id, a.cfg.NodeID)
	case lj.migrating:
		return nil, errkind.New(ErrBadRequest, "job %s is already migrating", id)
	}
	if _, ended := job.ReadStatus(lj.rec.Dir); ended {
		return nil, errkind.New(ErrBadRequest, "job %s is ending", id)
	}
	lj.migrating = true
	return lj, nil
}

// transfer does one migration; on error the job runs here as before.
func (a *Agent) transfer(mid string, lj *localJob, req migrateOutRequest, m *job.Migration) error {
	addr, err := a.peerAddr(req.To)
	if err != nil {
		return err
	}
	pid := lj.rec.PID
	if fi, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil && !a.allUsers {
		if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Uid != 0 {
			return errkind.New(ErrPinned, "%s: runs as uid %d, and root on node %s lacks CAP_SYS_RESOURCE, so CRIU cannot read its rlimits",
				req.ID, st.Uid, a.cfg.NodeID)
		}
	}
	tree := procfs.Tree(pid)
	files, reason := inspectJob(tree, a.memberIPs())
	if reason != "" {
		return errkind.New(ErrPinned, "%s: %s", req.ID, reason)
	}
	// Before freezing: can the destination open the job's files?
	if err := a.peerCallAddr(addr, http.MethodPost, "/v1/peer/migrate/check", files, nil); err != nil {
		return fmt.Errorf("destination %s: %w", req.To, err)
	}
	mounts, err := ckpt.Mounts(pid)
	if err != nil {
		return err
	}
	hdr := migrateHeader{MID: mid, From: a.cfg.NodeID, ID: req.ID, Home: lj.rec.Home, HomeAddr: lj.rec.HomeAddr, Mounts: mounts, Lazy: req.Lazy,
		Started: lj.rec.Started, Hold: lj.rec.Hold, Moves: lj.rec.Moves, LastMoved: lj.rec.LastMoved}
	if req.Manual && hdr.Hold != "pin" {
		hdr.Hold = "manual"
	}
	a.jobs.mu.Lock()
	hdr.AckOut, hdr.AckErr = lj.ackOut, lj.ackErr
	hasStdin := lj.stdin != nil
	a.jobs.mu.Unlock()
	if hasStdin {
		if l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/0"); err == nil && strings.HasPrefix(l, "pipe:[") {
			hdr.StdinKey = l
		}
	}
	dir := filepath.Join(a.imageDir, "out-"+mid)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	frozen := time.Now()
	var lazy *lazyDump
	if req.Lazy {
		if lazy, err = a.startLazyDump(mid, pid, dir, mounts); err != nil {
			ckpt.Thaw(procfs.Tree(pid))
			return err
		}
		defer lazy.end()
	} else {
		if m.Bytes, err = a.streamedDump(addr, mid, pid, dir, mounts); err != nil {
			ckpt.Thaw(procfs.Tree(pid)) // CRIU resumes it on failure; make sure
			go a.abortRemote(addr, mid)
			return err
		}
		hdr.Streamed = true
	}
	m.DumpMS = msSince(frozen)
	tree = procfs.Tree(pid)
	sendStart := time.Now()
	n, restoreMS, err := a.sendImages(addr, hdr, dir, lj.rec.Dir)
	m.Bytes, m.RestoreMS = m.Bytes+n, restoreMS
	m.CopyMS = msSince(sendStart) - restoreMS
	if err != nil {
		if lazy != nil {
			lazy.end() // CRIU holds the job until its page server ends
		}
		ckpt.Thaw(tree)
		go a.abortRemote(addr, mid)
		return fmt.Errorf("to %s: %w", req.To, err)
	}
	// The destination holds a stopped copy: end ours, then let it run.
	a.jobs.mu.Lock()
	delete(a.jobs.local, req.ID)
	if a.migr.movedTo == nil {
		a.migr.movedTo = map[string]string{}
	}
	a.migr.movedTo[req.ID] = req.To
	a.jobs.mu.Unlock()
	// A killed process runs on until it has freed its memory: wait until
	// roam-init, the last of the namespace to go, is gone, so that two
	// copies never run at once. A lazy migration's source copy cannot be
	// gone before CRIU's page server ends, which holds it: it is killed
	// after the commit (it never runs again) and its pages stay in CRIU's
	// pipes until the destination has them all.
	if lazy == nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
		job.WaitGone(pid, lj.rec.StartTix, 30*time.Second)
	}
	a.setOutcome(mid, "committed")
	_ = a.store.DeleteLocal(req.ID)
	if lj.stdin != nil {
		lj.stdin.Close()
	}
	cerr := retry(func() error {
		return a.peerCallAddr(addr, http.MethodPost, "/v1/peer/migrate/commit?mid="+mid, nil, nil)
	})
	m.FreezeMS = msSince(frozen)
	if lazy != nil {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	if cerr != nil {
		// It resumes on its own once it asks us (see awaitCommit).
		a.log.Warn("commit not acknowledged; the destination will ask", "job", req.ID, "err", cerr)
	}
	if lazy != nil {
		// The post-copy window: the job runs there, its pages still come
		// from here. CRIU's page server ends when the last one is taken.
		werr := lazy.wait()
		m.WindowMS = msSince(frozen) - m.FreezeMS
		m.Bytes += lazy.bytes.Load()
		if werr != nil {
			a.log.Error("lazy migration: pages not all delivered", "job", req.ID, "err", werr)
		}
		job.WaitGone(pid, lj.rec.StartTix, 30*time.Second)
	}
	os.RemoveAll(lj.rec.Dir)
	return nil
}

func msSince(t time.Time) float64 { return float64(time.Since(t).Microseconds()) / 1000 }

func newMID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (a *Agent) setOutcome(mid, o string) {
	a.jobs.mu.Lock()
	defer a.jobs.mu.Unlock()
	if a.migr.outcome == nil {
		a.migr.outcome = map[string]string{}
	}
	a.migr.outcome[mid] = o
}

func (a *Agent) abortRemote(addr, mid string) {
	_ = a.peerCallAddr(addr, http.MethodPost, "/v1/peer/migrate/abort?mid="+mid, nil, nil)
}

// memberIPs is the set of the cluster members' addresses.
func (a *Agent) memberIPs() map[string]bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := map[string]bool{}
	for _, p := range a.known {
		if h, _, err := net.SplitHostPort(p.peerAddr); err == nil {
			out[h] = true
		}
	}
	return out
}

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

// sendImages streams the header, the images and the spool files to the
// destination, and waits for its "ready": a restored, stopped copy.
func (a *Agent) sendImages(addr string, hdr migrateHeader, images, spool string) (int64, float64, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, err := planStream(hdr, images, spool)
	if err != nil {
		return 0, 0, err
	}
	pr, pw := io.Pipe()
	pw2 := &progressWriter{w: pw, last: make(chan struct{}, 1)}
	sent := make(chan error, 1)
	go func() {
		err := st.write(pw2)
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
	req.ContentLength = st.size()
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

// stream is a migration stream, planned before it is sent so that its
// length is known: the header as one JSON line, then a tar archive with the
// images under img/ and the spool files under spool/. A known length lets
// the body go out without HTTP chunking, in large writes.
type stream struct {
	head  []byte
	files []streamFile
}

type streamFile struct {
	name, path string
	size       int64
}

func planStream(hdr migrateHeader, images, spool string) (*stream, error) {
	b, err := json.Marshal(hdr)
	if err != nil {
		return nil, err
	}
	s := &stream{head: append(b, '\n')}
	for _, part := range []struct{ prefix, dir string }{{"img/", images}, {"spool/", spool}} {
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
			s.files = append(s.files, streamFile{part.prefix + e.Name(), filepath.Join(part.dir, e.Name()), fi.Size()})
		}
	}
	return s, nil
}

// size is the stream's length in bytes: the header line, a 512-byte tar
// header and the padded content per file (names are short, so no PAX
// records), and tar's two closing blocks.
func (s *stream) size() int64 {
	n := int64(len(s.head)) + 1024
	for _, f := range s.files {
		n += 512 + (f.size+511)/512*512
	}
	return n
}

func (s *stream) write(w io.Writer) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	if _, err := bw.Write(s.head); err != nil {
		return err
	}
	tw := tar.NewWriter(bw)
	for _, f := range s.files {
		if err := addFile(tw, f); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return bw.Flush()
}

// addFile adds f with the size planned; a file that changed size since
// fails the stream (the job is frozen, so none should).
func addFile(tw *tar.Writer, f streamFile) error {
	if len(f.name) >= 100 {
		return fmt.Errorf("image name too long: %s", f.name)
	}
	fh, err := os.Open(f.path)
	if err != nil {
		return err
	}
	defer fh.Close()
	if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o600, Size: f.size, Typeflag: tar.TypeReg, Format: tar.FormatUSTAR}); err != nil {
		return err
	}
	_, err = io.CopyN(tw, fh, f.size)
	return err
}

// ---- destination ----

// migrateCheck answers whether this node can open the job's files: every
// path must exist here.
func (a *Agent) migrateCheck(paths []string) error {
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

// migrateIn takes a migration stream, restores the job stopped, and keeps
// it until the source commits or aborts.
func (a *Agent) migrateIn(r io.Reader) (migrateReady, error) {
	br := bufio.NewReaderSize(r, 1<<20)
	line, err := br.ReadSlice('\n')
	if err != nil {
		return migrateReady{}, errkind.New(ErrBadRequest, "migration header: %v", err)
	}
	var hdr migrateHeader
	if len(line) > maxHeader {
		return migrateReady{}, errkind.New(ErrBadRequest, "migration header: too long")
	}
	if err := json.Unmarshal(line, &hdr); err != nil {
		return migrateReady{}, errkind.New(ErrBadRequest, "migration header: %v", err)
	}
	if err := hdr.validate(); err != nil {
		return migrateReady{}, err
	}
	spool := filepath.Join(a.launcher.SpoolRoot, hdr.ID)
	images := filepath.Join(a.imageDir, "in-"+hdr.MID)
	a.jobs.mu.Lock()
	_, here := a.jobs.local[hdr.ID]
	_, busy := a.migr.incoming[hdr.ID]
	a.jobs.mu.Unlock()
	if here || busy {
		return migrateReady{}, errkind.New(ErrBadRequest, "job %s is already on node %s", hdr.ID, a.cfg.NodeID)
	}
	cleanup := func() {
		os.RemoveAll(images)
		os.RemoveAll(spool)
	}
	if hdr.Streamed {
		// The pages are in the sink's directory already.
		if _, err := a.claimSink(hdr.MID); err != nil {
			return migrateReady{}, err
		}
		os.RemoveAll(spool)
	} else {
		cleanup()
		if err := os.MkdirAll(images, 0o700); err != nil {
			return migrateReady{}, fmt.Errorf("images directory: %w", err)
		}
	}
	if err := os.MkdirAll(spool, 0o700); err != nil {
		cleanup()
		return migrateReady{}, fmt.Errorf("spool directory: %w", err)
	}
	if err := readArchive(br, images, spool); err != nil {
		cleanup()
		return migrateReady{}, err
	}
	in := &incoming{hdr: hdr, spool: spool, images: images, done: make(chan struct{})}
	inherit := map[string]*os.File{}
	var stdinR *os.File
	if hdr.StdinKey != "" {
		r, w, err := os.Pipe()
		if err != nil {
			cleanup()
			return migrateReady{}, err
		}
		stdinR, in.stdin = r, w
		inherit[hdr.StdinKey] = r
	}
	mounts := map[string]string{}
	for _, mp := range hdr.Mounts {
		mounts[mp] = mp
	}
	mounts[ckpt.JobDir] = spool
	restoreStart := time.Now()
	if hdr.Lazy {
		if in.lazyDone, err = a.startLazyPages(hdr, images); err != nil {
			if in.stdin != nil {
				in.stdin.Close()
			}
			stdinR.Close()
			cleanup()
			return migrateReady{}, err
		}
	}
	pid, err := a.criu.Restore(ckpt.RestoreOpts{Dir: images, Mounts: mounts, Inherit: inherit, Lazy: hdr.Lazy, CgroupRoots: a.restoreCgroups()})
	if stdinR != nil {
		stdinR.Close()
	}
	if err != nil {
		if in.stdin != nil {
			in.stdin.Close()
		}
		cleanup()
		return migrateReady{}, err
	}
	in.pid, in.tix = pid, job.StartTicks(pid)
	if a.cfg.Cgroup != "" && !a.probe.Layout.V2 {
		// Restored outside the CPU quota (see restoreCgroups); now in.
		for _, p := range procfs.Tree(pid) {
			if err := a.probe.Layout.AddCPUProc(a.cfg.Cgroup, p); err != nil {
				a.log.Warn("move restored job into the node's cgroup", "job", hdr.ID, "pid", p, "err", err)
			}
		}
	}
	a.jobs.mu.Lock()
	if a.migr.incoming == nil {
		a.migr.incoming = map[string]*incoming{}
	}
	a.migr.incoming[hdr.MID] = in
	a.jobs.mu.Unlock()
	go a.awaitCommit(in)
	return migrateReady{RestoreMS: msSince(restoreStart)}, nil
}

func (h migrateHeader) validate() error {
	bad := func(f string, a ...any) error { return errkind.New(ErrBadRequest, "migration header: "+f, a...) }
	if !midPattern.MatchString(h.MID) {
		return bad("mid %q", h.MID)
	}
	if home, ok := homeOf(h.ID); !ok || home != h.Home {
		return bad("job id %q", h.ID)
	}
	if _, _, err := net.SplitHostPort(h.HomeAddr); err != nil {
		return bad("home address %q", h.HomeAddr)
	}
	for _, m := range h.Mounts {
		if !filepath.IsAbs(m) || filepath.Clean(m) != m || strings.ContainsAny(m, "[]") {
			return bad("mount %q", m)
		}
	}
	if h.Hold != "" && h.Hold != "pin" && h.Hold != "manual" {
		return bad("hold %q", h.Hold)
	}
	if h.Lazy && h.Streamed {
		return bad("lazy and streamed at once")
	}
	if h.StdinKey != "" && !pipeKeyPattern.MatchString(h.StdinKey) {
		return bad("stdin %q", h.StdinKey)
	}
	return nil
}

// readArchive extracts a migration's tar: img/NAME into images, spool/NAME
// into spool; nothing else, and no name with a slash.
func readArchive(r io.Reader, images, spool string) error {
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return errkind.New(ErrBadRequest, "migration archive: %v", err)
		}
		dir, name, ok := strings.Cut(h.Name, "/")
		if !ok || name == "" || strings.Contains(name, "/") || name == "." || name == ".." || h.Typeflag != tar.TypeReg {
			return errkind.New(ErrBadRequest, "migration archive: entry %q", h.Name)
		}
		var dst string
		switch dir {
		case "img":
			dst = filepath.Join(images, name)
		case "spool":
			dst = filepath.Join(spool, name)
		default:
			return errkind.New(ErrBadRequest, "migration archive: entry %q", h.Name)
		}
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
		if err != nil {
			return fmt.Errorf("write image %s: %w", dst, err)
		}
		_, err = io.Copy(f, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write image %s: %w", dst, err)
		}
	}
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

// awaitCommit waits for the source's commit or abort; when neither comes,
// it asks the source how the migration ended, until it knows.
func (a *Agent) awaitCommit(in *incoming) {
	select {
	case <-in.done:
		return
	case <-a.stop:
		return
	case <-time.After(commitWait):
	}
	t := time.NewTicker(2 * time.Second)
	defer t.Stop()
	for {
		var o struct {
			Outcome string `json:"outcome"`
		}
		err := a.peerCall(in.hdr.From, http.MethodGet, "/v1/peer/migrate/outcome?mid="+in.hdr.MID, nil, &o)
		switch {
		case err == nil && o.Outcome == "committed":
			_ = a.commitIn(in.hdr.MID)
			return
		case err == nil && o.Outcome != "pending":
			a.abortIn(in.hdr.MID)
			return
		}
		select {
		case <-in.done:
			return
		case <-a.stop:
			return
		case <-t.C:
		}
	}
}

// commitIn resumes a restored copy and makes it a job of this node.
func (a *Agent) commitIn(mid string) error {
	a.jobs.mu.Lock()
	in := a.migr.incoming[mid]
	if in == nil {
		a.jobs.mu.Unlock()
		return errkind.New(ErrNotFound, "no migration %s here", mid)
	}
	delete(a.migr.incoming, mid)
	close(in.done)
	l := job.Local{ID: in.hdr.ID, Home: in.hdr.Home, HomeAddr: in.hdr.HomeAddr, PID: in.pid, StartTix: in.tix, Dir: in.spool,
		Started: in.hdr.Started, Hold: in.hdr.Hold, Moves: in.hdr.Moves + 1, LastMoved: time.Now()}
	a.jobs.local[l.ID] = &localJob{rec: l, stdin: in.stdin, ackOut: in.hdr.AckOut, ackErr: in.hdr.AckErr}
	delete(a.migr.movedTo, l.ID)
	a.jobs.mu.Unlock()
	a.arrived(l.ID)
	if err := a.store.PutLocals(l); err != nil {
		a.log.Error("job table", "err", err)
	}
	ckpt.Thaw(procfs.Tree(in.pid))
	a.removeImages(in)
	a.kickPusher()
	return nil
}

// abortIn ends a restored copy the source kept.
func (a *Agent) abortIn(mid string) {
	a.jobs.mu.Lock()
	in := a.migr.incoming[mid]
	if in != nil {
		delete(a.migr.incoming, mid)
		close(in.done)
	}
	a.jobs.mu.Unlock()
	a.dropSink(mid)
	if in == nil {
		return
	}
	a.arrived(in.hdr.ID)
	if job.Alive(in.pid, in.tix) {
		_ = syscall.Kill(in.pid, syscall.SIGKILL)
		job.WaitGone(in.pid, in.tix, 5*time.Second)
	}
	if in.stdin != nil {
		in.stdin.Close()
	}
	a.removeImages(in)
	os.RemoveAll(in.spool)
}

// removeImages removes an incoming migration's images, once its lazy-pages
// daemon (if any) no longer reads them.
func (a *Agent) removeImages(in *incoming) {
	if in.lazyDone == nil {
		os.RemoveAll(in.images)
		return
	}
	go func() {
		<-in.lazyDone
		os.RemoveAll(in.images)
	}()
}

// ---- what cannot migrate ----

// inspectJob lists the regular files a job's processes hold open (which
// the destination must reach) and says why the job cannot migrate at all,
// or "": an established TCP connection, a device other than the harmless
// ones, a deleted file.
func inspectJob(tree []int, members map[string]bool) (files []string, reason string) {
	sockets := map[string]bool{}
	seen := map[string]bool{}
	for _, p := range tree {
		dir := "/proc/" + strconv.Itoa(p) + "/fd/"
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			l, err := os.Readlink(dir + e.Name())
			if err != nil {
				continue
			}
			switch {
			case strings.HasPrefix(l, "socket:["):
				sockets[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
			case strings.HasSuffix(l, " (deleted)"):
				return nil, "holds open a deleted file " + strings.TrimSuffix(l, " (deleted)")
			case strings.HasPrefix(l, "/dev/"):
				if !harmlessDevice[l] {
					var st syscall.Stat_t
					if syscall.Stat(dir+e.Name(), &st) == nil && (st.Mode&syscall.S_IFMT == syscall.S_IFCHR || st.Mode&syscall.S_IFMT == syscall.S_IFBLK) {
						return nil, "holds open the device " + l
					}
				}
			case strings.HasPrefix(l, "/") && !strings.HasPrefix(l, ckpt.JobDir+"/") && !seen[l]:
				seen[l] = true
				files = append(files, l)
			}
		}
	}
	if len(sockets) > 0 && len(tree) > 0 {
		if c := establishedTCP(tree[0], sockets); c != "" {
			ip, _, _ := net.SplitHostPort(c)
			where := "outside the cluster"
			if members[ip] {
				where = "inside the cluster; its address would change"
			}
			return nil, "holds a TCP connection to " + c + " (" + where + ")"
		}
	}
	return files, ""
}

var harmlessDevice = map[string]bool{"/dev/null": true, "/dev/zero": true, "/dev/random": true, "/dev/urandom": true}

// establishedTCP returns the remote address of an established TCP
// connection among the sockets, read from the job's network namespace, or
// "" when there is none (listening and UDP sockets move with the job).
func establishedTCP(pid int, sockets map[string]bool) string {
	for _, f := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/net/" + f)
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(line)
			if len(fs) < 10 || fs[3] != "01" || !sockets[fs[9]] {
				continue
			}
			return hexAddr(fs[2])
		}
	}
	return ""
}

// hexAddr turns /proc/net/tcp's "0100007F:1F90" into "127.0.0.1:8080".
func hexAddr(s string) string {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return s
	}
	raw, err := hex.DecodeString(h)
	if err != nil {
		return s
	}
	// The kernel prints each 32-bit word in host (little-endian) order.
	for i := 0; i+4 <= len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	port, _ := strconv.ParseUint(p, 16, 16)
	return net.JoinHostPort(net.IP(raw).String(), strconv.FormatUint(port, 10))
}

// ---- the home node's record ----

// jobNote is what a job's current node tells its home: a migration, the
// new node, a pin reason, the manual flag.
type jobNote struct {
	ID        string         `json:"id"`
	Node      string         `json:"node,omitempty"`
	Migration *job.Migration `json:"migration,omitempty"`
	PinReason string         `json:"pin_reason,omitempty"`
	Manual    *bool          `json:"manual,omitempty"`
}

func (a *Agent) noteHome(home string, n jobNote) error {
	if home == a.cfg.NodeID {
		return a.takeNote(n)
	}
	return retry(func() error { return a.peerCall(home, http.MethodPost, "/v1/peer/note", n, nil) })
}

// retry tries f three times, 200 ms apart, and returns its last error.
func retry(f func() error) error {
	err := f()
	for try := 1; try < 3 && err != nil; try++ {
		time.Sleep(200 * time.Millisecond)
		err = f()
	}
	return err
}

// takeNote updates a home record.
func (a *Agent) takeNote(n jobNote) error {
	a.jobs.mu.Lock()
	defer a.jobs.mu.Unlock()
	rec := a.jobs.home[n.ID]
	if rec == nil {
		return errkind.New(ErrNotFound, "unknown job %s", n.ID)
	}
	if n.Node != "" && !rec.Over() {
		rec.Node = n.Node
	}
	if n.Migration != nil {
		if n.Migration.OK {
			rec.Migrations++
			rec.PinReason = ""
		}
		rec.MigrationLog = append(rec.MigrationLog, *n.Migration)
		if len(rec.MigrationLog) > job.MaxMigrationLog {
			rec.MigrationLog = rec.MigrationLog[len(rec.MigrationLog)-job.MaxMigrationLog:]
		}
	}
	if n.PinReason != "" {
		rec.PinReason = n.PinReason
	}
	if n.Manual != nil {
		rec.Manual = *n.Manual
	}
	return a.store.PutRecords(*rec)
}

// migrationAPI registers the CLI's migration endpoint.
func (a *Agent) migrationAPI(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/migrate", callerJSON(a.Migrate))
}

// peerMigrationAPI registers the migration endpoints other agents call.
func (a *Agent) peerMigrationAPI(peer *http.ServeMux) {
	peer.HandleFunc("POST /v1/peer/migrate-out", jsonCall(a.migrateOut))
	peer.HandleFunc("POST /v1/peer/migrate/check", jsonCall(func(paths []string) (struct{}, error) {
		return struct{}{}, a.migrateCheck(paths)
	}))
	peer.HandleFunc("POST /v1/peer/migrate", func(w http.ResponseWriter, r *http.Request) {
		// A read that makes no progress for stallTimeout ends the
		// transfer (the source's link went down, or it died).
		rc := http.NewResponseController(w)
		body := &deadlineReader{r: r.Body, extend: func() { _ = rc.SetReadDeadline(time.Now().Add(stallTimeout)) }}
		ready, err := a.migrateIn(body)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, ready)
	})
	peer.HandleFunc("GET /v1/peer/pages", a.servePages)
	peer.HandleFunc("POST /v1/peer/hold", queryCall("id", a.releaseHold))
	peer.HandleFunc("POST /v1/peer/migrate/sink", queryCall("mid", func(mid string) error {
		_, err := a.openSink(mid)
		return err
	}))
	peer.HandleFunc("GET /v1/peer/migrate/sink", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"error": a.sinkError(r.URL.Query().Get("mid"))})
	})
	peer.HandleFunc("POST /v1/peer/migrate/commit", queryCall("mid", a.commitIn))
	peer.HandleFunc("POST /v1/peer/migrate/abort", func(w http.ResponseWriter, r *http.Request) {
		a.abortIn(r.URL.Query().Get("mid"))
		writeJSON(w, http.StatusOK, struct{}{})
	})
	peer.HandleFunc("GET /v1/peer/migrate/outcome", func(w http.ResponseWriter, r *http.Request) {
		a.jobs.mu.Lock()
		o := a.migr.outcome[r.URL.Query().Get("mid")]
		a.jobs.mu.Unlock()
		if o == "" {
			o = "unknown"
		}
		writeJSON(w, http.StatusOK, map[string]string{"outcome": o})
	})
	peer.HandleFunc("POST /v1/peer/note", jsonCall(func(n jobNote) (struct{}, error) {
		return struct{}{}, a.takeNote(n)
	}))
}

// queryCall is a handler that calls f with the query parameter param and
// answers {} or f's error.
func queryCall(param string, f func(string) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := f(r.URL.Query().Get(param)); err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, struct{}{})
	}
}

// callerJSON is jsonCall for the CLI's endpoints: f also gets the caller
// (from SO_PEERCRED).
func callerJSON[T, R any](f func(Caller, T) (R, error)) http.HandlerFunc {
	return withCaller(func(c Caller, w http.ResponseWriter, r *http.Request) {
		jsonCall(func(in T) (R, error) { return f(c, in) })(w, r)
	})
}

// jsonCall is a handler that decodes a T, calls f and answers with its
// result or its error.
func jsonCall[T, R any](f func(T) (R, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var in T
		if err := decode(r, &in); err != nil {
			writeError(w, err)
			return
		}
		out, err := f(in)
		if err != nil {
			writeError(w, err)
			return
		}
		writeJSON(w, http.StatusOK, out)
	}
}

// deadlineReader extends a read deadline before every read.
type deadlineReader struct {
	r      io.Reader
	extend func()
}

func (d *deadlineReader) Read(p []byte) (int, error) {
	d.extend()
	return d.r.Read(p)
}
