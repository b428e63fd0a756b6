package agent

// The fake node's Checkpointer (harness_node_test.go has the node and its
// world): a dump writes the job's image and freezes its process, a
// restore spawns a frozen copy from an image, and the pages go through
// fake page servers over in-memory pipes.

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"roam/internal/agent/phases"
	"roam/internal/ckpt"
	"roam/internal/migrate"
	"roam/internal/proctext"
)

func (f *fakeNode) Support() (string, bool) { return "fake checkpointer", true }

// Inspect: a job stopped by roam kill -s STOP has its program (pid 1 in
// its namespace, here) stopped; pin pins every job, and once frozen,
// frozenPin pins it.
func (f *fakeNode) Inspect(pid int, members map[string]bool, frozen bool) migrate.Verdict {
	var v migrate.Verdict
	f.w.mu.Lock()
	if p := f.proc(pid, 0); p != nil && p.stopped {
		v.Stopped = []int{1}
	}
	f.w.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	v.Pin = f.pin
	if frozen {
		if f.frozenPin != "" {
			v.Pin = f.frozenPin
		}
		v.Files = f.restoredFiles
	}
	return v
}

func (f *fakeNode) Mounts(pid int) ([]string, error) { return nil, nil }

// Creds: the fake processes have none of their own; restoredAs stands for
// a restored job's, frozenAs for a frozen one's.
func (f *fakeNode) Creds(pid int) ([]proctext.Creds, error) {
	f.w.mu.Lock()
	p := f.proc(pid, 0)
	isFrozen := p != nil && p.state == frozen
	f.w.mu.Unlock()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.frozenAs != nil && isFrozen {
		return []proctext.Creds{*f.frozenAs}, nil
	}
	if f.restoredAs != nil {
		return []proctext.Creds{*f.restoredAs}, nil
	}
	return nil, nil
}

// image is what a fake dump writes: a restored copy runs as the owner
// the dumped one ran as.
type image struct {
	Job   string `json:"job"`
	Pages int    `json:"pages"`
	UID   uint32 `json:"uid"`
}

// freeze freezes the job and writes its image, or fails as CRIU can
// (leaving the job running).
func (f *fakeNode) freeze(pid int, dir string) (*fproc, error) {
	if f.dead.Load() {
		return nil, errDead
	}
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	p := f.proc(pid, 0)
	if p == nil {
		return nil, fmt.Errorf("criu dump: no process %d", pid)
	}
	// The host takes the job out of its CPU group for the dump (ckpt's
	// lift); a copy resumed here must be settled back.
	p.outsideCPU = true
	if f.w.rng.Float64() < f.w.dumpFail {
		f.w.counts["dump-fault"]++
		return nil, errors.New("criu dump: injected fault")
	}
	b, _ := json.Marshal(image{Job: p.job, Pages: f.w.pageBytes, UID: p.uid})
	if err := os.WriteFile(filepath.Join(dir, "job.img"), b, 0o600); err != nil {
		return nil, err
	}
	f.w.set(p, frozen, "dump")
	return p, nil
}

// unfreeze is CRIU resuming a job whose dump failed.
func (f *fakeNode) unfreeze(p *fproc) {
	if f.dead.Load() {
		return
	}
	f.w.mu.Lock()
	f.w.set(p, running, "dump-failed")
	f.w.mu.Unlock()
}

// The page protocol of the fakes: an 8-byte length, the pages, and one
// byte back from the sink once it has them all.
func (f *fakeNode) Dump(pid int, dir string, mounts []string, pages net.Conn) (ckpt.Times, error) {
	t := time.Now()
	f.w.mu.Lock()
	d := f.w.dumpTime
	f.w.dumping++
	f.w.maxDumping = max(f.w.maxDumping, f.w.dumping)
	f.w.mu.Unlock()
	time.Sleep(d)
	f.w.mu.Lock()
	f.w.dumping--
	f.w.mu.Unlock()
	f.mu.Lock()
	hook := f.onDump
	f.mu.Unlock()
	if hook != nil {
		if err := hook(pid); err != nil {
			pages.Close()
			return ckpt.Times{{Name: "criu dump", MS: phases.Since(t), Frozen: true}}, err
		}
	}
	err := f.dump(pid, dir, pages)
	return ckpt.Times{{Name: "criu dump", MS: phases.Since(t), Frozen: true}}, err
}

func (f *fakeNode) dump(pid int, dir string, pages net.Conn) error {
	defer pages.Close()
	p, err := f.freeze(pid, dir)
	if err != nil {
		return err
	}
	n := f.w.pageBytes
	buf := make([]byte, 8+n)
	binary.BigEndian.PutUint64(buf, uint64(n))
	if _, err := pages.Write(buf); err != nil {
		f.unfreeze(p)
		return fmt.Errorf("criu dump: write pages: %w", err)
	}
	var ack [1]byte
	if _, err := io.ReadFull(pages, ack[:]); err != nil {
		f.unfreeze(p)
		return fmt.Errorf("criu dump: page server: %w", err)
	}
	return nil
}

// Checkpoint is a dump whose pages stay in dir.
func (f *fakeNode) Checkpoint(_ string, pid int, dir string, mounts []string) error {
	if _, err := f.freeze(pid, dir); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "pages.img"), make([]byte, f.w.pageBytes), 0o600)
}

// fakeSink is a fake page server.
type fakeSink struct {
	ours net.Conn
	done chan struct{}
	err  error
}

func (f *fakeNode) Sink(dir string) (ckpt.Sink, error) {
	f.mu.Lock()
	f.sinks++
	f.mu.Unlock()
	if f.dead.Load() {
		return nil, errDead
	}
	if err := f.pagesFault(); err != nil {
		return nil, err
	}
	ours, theirs := net.Pipe()
	s := &fakeSink{ours: theirs, done: make(chan struct{})}
	f.mu.Lock()
	f.servers = append(f.servers, s)
	f.mu.Unlock()
	go func() {
		defer close(s.done)
		defer ours.Close()
		var hdr [8]byte
		if _, err := io.ReadFull(ours, hdr[:]); err != nil {
			s.err = fmt.Errorf("page server: %w", err)
			return
		}
		b := make([]byte, binary.BigEndian.Uint64(hdr[:]))
		if _, err := io.ReadFull(ours, b); err != nil {
			s.err = fmt.Errorf("page server: %w", err)
			return
		}
		if err := os.WriteFile(filepath.Join(dir, "pages.img"), b, 0o600); err != nil {
			s.err = err
			return
		}
		_, _ = ours.Write([]byte{1})
	}()
	return s, nil
}

// pagesFault is the injected failure of a page server's start, if one
// is drawn.
func (f *fakeNode) pagesFault() error {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	if f.w.fails(f.w.pagesFail, "pages-fault") {
		return errors.New("fake page server: injected fault")
	}
	return nil
}

func (s *fakeSink) Conn() net.Conn        { return s.ours }
func (s *fakeSink) Done() <-chan struct{} { return s.done }
func (s *fakeSink) Err() error            { return s.err }
func (s *fakeSink) Stop()                 { s.ours.Close(); <-s.done }

// fakeLazy serves pages to whoever connects, until one has taken them
// all or it ends.
type fakeLazy struct {
	f    *fakeNode
	p    *fproc
	n    int
	done chan struct{}
	once sync.Once
	err  error
}

func (f *fakeNode) DumpLazy(pid int, dir string, mounts []string) (ckpt.LazyDump, ckpt.Times, error) {
	t := time.Now()
	f.w.mu.Lock()
	wait := f.w.dumpTime
	f.w.mu.Unlock()
	time.Sleep(wait)
	p, err := f.freeze(pid, dir)
	times := ckpt.Times{{Name: "criu dump", MS: phases.Since(t), Frozen: true}}
	if err != nil {
		return nil, times, err
	}
	d := &fakeLazy{f: f, p: p, n: f.w.pageBytes, done: make(chan struct{})}
	f.mu.Lock()
	f.lazies = append(f.lazies, d)
	f.mu.Unlock()
	return d, times, nil
}

func (d *fakeLazy) Pages() (net.Conn, error) {
	select {
	case <-d.done:
		return nil, errors.New("page server ended")
	default:
	}
	ours, theirs := net.Pipe()
	go func() {
		defer ours.Close()
		buf := make([]byte, 8+d.n)
		binary.BigEndian.PutUint64(buf, uint64(d.n))
		if _, err := ours.Write(buf); err != nil {
			return
		}
		var ack [1]byte
		if _, err := io.ReadFull(ours, ack[:]); err == nil {
			d.once.Do(func() { close(d.done) })
		}
	}()
	return theirs, nil
}

func (d *fakeLazy) Wait() error {
	<-d.done
	return d.err
}

func (d *fakeLazy) End() {
	d.once.Do(func() {
		d.err = errors.New("page server stopped")
		close(d.done)
	})
}

func (f *fakeNode) LazyPages(dir string, dial func() (net.Conn, error)) (<-chan struct{}, func(), error) {
	if f.dead.Load() {
		return nil, nil, errDead
	}
	if err := f.pagesFault(); err != nil {
		return nil, nil, err
	}
	done := make(chan struct{})
	stop := make(chan struct{})
	var once sync.Once
	go func() {
		defer close(done)
		// As CRIU's daemon, it gives up when the source does not serve.
		for try := 0; try < 3; try++ {
			c, err := dial()
			if err == nil {
				var hdr [8]byte
				if _, err = io.ReadFull(c, hdr[:]); err == nil {
					b := make([]byte, binary.BigEndian.Uint64(hdr[:]))
					if _, err = io.ReadFull(c, b); err == nil {
						_, err = c.Write([]byte{1})
					}
				}
				c.Close()
				if err == nil {
					return
				}
			}
			select {
			case <-stop:
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return done, func() { once.Do(func() { close(stop) }); <-done }, nil
}

func (f *fakeNode) Restore(s ckpt.RestoreSpec) (int, ckpt.Times, error) {
	f.mu.Lock()
	f.restores = append(f.restores, s)
	hook := f.onRestore
	f.mu.Unlock()
	if hook != nil {
		hook(s)
	}
	t := time.Now()
	f.w.mu.Lock()
	d := f.w.restoreTime
	f.w.mu.Unlock()
	time.Sleep(d)
	pid, err := f.restore(s)
	if err == nil && s.Check != nil {
		// As CRIU: the check runs while the tasks are held, and its
		// error ends the restore with them killed.
		if err = s.Check(pid); err != nil {
			f.Kill(pid, 0, 0)
			pid = 0
		}
	}
	return pid, ckpt.Times{{Name: "criu restore", MS: phases.Since(t)}}, err
}

func (f *fakeNode) restore(s ckpt.RestoreSpec) (int, error) {
	if f.dead.Load() {
		return 0, errDead
	}
	b, err := os.ReadFile(filepath.Join(s.Dir, "job.img"))
	if err != nil {
		return 0, fmt.Errorf("criu restore: %w", err)
	}
	var img image
	if err := json.Unmarshal(b, &img); err != nil {
		return 0, fmt.Errorf("criu restore: %w", err)
	}
	if !s.Lazy {
		pg, err := os.ReadFile(filepath.Join(s.Dir, "pages.img"))
		if err != nil || len(pg) != img.Pages {
			return 0, fmt.Errorf("criu restore: pages missing (%d bytes, %v)", len(pg), err)
		}
	}
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	if f.w.rng.Float64() < f.w.restoreFail {
		f.w.counts["restore-fault"]++
		return 0, errors.New("criu restore: injected fault")
	}
	p := f.w.spawn(img.Job, f.name, s.Mounts[ckpt.JobDir], img.UID, frozen)
	p.outsideCPU = s.LeaveCPU
	f.w.counts["restore"]++
	f.w.check(img.Job, "restore")
	return p.pid, nil
}

func (f *fakeNode) Thaw(pid int, keep []int) {
	f.mu.Lock()
	hook := f.onThaw
	f.mu.Unlock()
	if hook != nil {
		hook(pid)
	}
	if f.dead.Load() {
		return
	}
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	// A job has one process here: kept, it stays stopped.
	if p := f.proc(pid, 0); p != nil {
		p.stopped = len(keep) > 0
		if !p.stopped {
			f.w.set(p, running, "thaw")
		}
	}
}

func (f *fakeNode) StoppedCopies(id, spool string) []int {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	var out []int
	for _, p := range f.w.procs {
		if p.job == id && p.node == f.name && p.spool == spool && p.state == frozen {
			out = append(out, p.pid)
		}
	}
	return out
}
