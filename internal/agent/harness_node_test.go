package agent

// The harness's fake nodes: one world of fake processes shared by every
// node (the harness's "kernel"), and per node the Processes, Checkpointer
// and Prober an agent is given. The world checks the invariant on every
// change of a copy: never two running copies of a job, never none.

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"roam/internal/agent/phases"
	"roam/internal/ckpt"
	"roam/internal/job"
	"roam/internal/migrate"
	"roam/internal/proctext"
)

// Process states of the fake kernel.
const (
	running = 'R'
	frozen  = 'T'
	gone    = 'X'
)

// fproc is a fake job process (its roam-init).
type fproc struct {
	pid   int
	tix   uint64
	job   string
	node  string
	spool string
	state byte
	exit  chan struct{} // closed when gone
	// stopped: by a SIGSTOP that roam kill sent, until a SIGCONT
	stopped bool
	// outsideCPU: restored with LeaveCPU, or taken out for a dump, and
	// not yet settled into its CPU group
	outsideCPU bool
	// cpu is the CPU time it has had here, in seconds (world.account).
	cpu float64
}

// world is every fake process of a harness.
type world struct {
	mu    sync.Mutex
	rng   *rand.Rand
	next  int
	procs map[int]*fproc
	// acct is when account last gave the processes their CPU time.
	acct  time.Time
	ended map[string]bool // jobs the harness ended on purpose
	// cutOff are nodes a test cut off from the others: their copies do
	// not count for the invariant (a partition is where a job may run on
	// both sides, until the old side hears it is gone).
	cutOff map[string]bool
	broken []string // invariant violations, in order
	counts map[string]int
	// odds of a failed dump and a failed restore
	dumpFail, restoreFail float64
	// settleFail: how many Settle calls fail before one moves the job
	settleFail int
	// how long a dump and a restore take (fake time)
	dumpTime, restoreTime time.Duration
	// dumping: dumps running now; maxDumping, the most at once
	dumping, maxDumping int
	pageBytes           int
	unread              []*os.File // the read ends of jobs' stdin pipes
}

func newWorld(seed int64) *world {
	return &world{rng: rand.New(rand.NewSource(seed)), next: 100, procs: map[int]*fproc{}, ended: map[string]bool{}, cutOff: map[string]bool{},
		counts: map[string]int{}, pageBytes: 4096}
}

// check tests the invariant for job id. w.mu held.
func (w *world) check(id, what string) {
	if w.ended[id] {
		return
	}
	run, all := 0, 0
	var where []string
	for _, p := range w.procs {
		if p.job != id || p.state == gone || w.cutOff[p.node] {
			continue
		}
		all++
		if p.state == running {
			run++
		}
		where = append(where, fmt.Sprintf("%s:%d:%c", p.node, p.pid, p.state))
	}
	if run > 1 || all == 0 {
		sort.Strings(where)
		w.broken = append(w.broken, fmt.Sprintf("job %s after %s: %d running of %d copies %v", id, what, run, all, where))
	}
}

func (w *world) set(p *fproc, st byte, what string) {
	if p.state == st {
		return
	}
	if p.state == gone {
		return
	}
	p.state = st
	if st == gone {
		close(p.exit)
	}
	w.counts[what]++
	w.check(p.job, what)
}

func (w *world) spawn(id, node, spool string, st byte) *fproc {
	w.next++
	p := &fproc{pid: w.next, tix: uint64(w.next) * 7, job: id, node: node, spool: spool, state: st, exit: make(chan struct{})}
	w.procs[p.pid] = p
	return p
}

// account gives every running process its share of its node's CPU (one
// CPU a node, shared equally) since the last call, with the processes
// running now: Usage calls it, at every round of a node's scheduler, so
// the shares of a second or so are approximate, which a fake may be.
// w.mu held.
func (w *world) account() {
	now := time.Now()
	if !w.acct.IsZero() {
		dt := now.Sub(w.acct).Seconds()
		n := map[string]int{}
		for _, p := range w.procs {
			if p.state == running && !p.stopped {
				n[p.node]++
			}
		}
		for _, p := range w.procs {
			if p.state == running && !p.stopped {
				p.cpu += dt / float64(n[p.node])
			}
		}
	}
	w.acct = now
}

// copies is where job id's live copies are.
func (w *world) copies(id string) (runningOn []string, frozenOn []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.procs {
		if p.job != id {
			continue
		}
		switch p.state {
		case running:
			runningOn = append(runningOn, p.node)
		case frozen:
			frozenOn = append(frozenOn, p.node)
		}
	}
	return
}

// endAll kills every process, once the harness has checked the end state.
func (w *world) endAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.procs {
		w.ended[p.job] = true
		w.set(p, gone, "end")
	}
}

// fakeNode is one node's view of the world, for one incarnation of its
// agent: once that agent crashed, the handle does nothing more (a dead
// agent's goroutines cannot act).
type fakeNode struct {
	w     *world
	name  string
	spool string
	dead  atomic.Bool
	mu    sync.Mutex
	sinks []*fakeSink // the page servers it started
	// lazies are the lazy dumps it started, serving pages.
	lazies []*fakeLazy
	// restoredAs, when set, is what the credentials of a restored job's
	// tasks are (a forged image's); else they are the owner's.
	restoredAs *proctext.Creds
	// onActivity, when set, runs as a job's activity is probed (before
	// the probe reads anything).
	onActivity func()
	// frozenAs, when set, is what the credentials of a frozen job's
	// tasks are (a set-id program it started since it was first judged).
	frozenAs *proctext.Creds
	// frozenPin, when set, is what the rules say of a job once it is
	// frozen: something it took between the check and the freeze.
	frozenPin string
	// restoredFiles, when set, are the files a frozen or restored job
	// holds as this node sees them (a path swapped after the check).
	restoredFiles []migrate.OpenFile
}

// crash is the agent's process dying: nothing it holds acts again, and
// the kernel closes its descriptors (its page servers' sockets).
func (f *fakeNode) crash() {
	f.dead.Store(true)
	f.mu.Lock()
	sinks, lazies := f.sinks, f.lazies
	f.sinks, f.lazies = nil, nil
	f.mu.Unlock()
	for _, s := range sinks {
		s.ours.Close()
	}
	// A lazy dump's page server dies with the node too: its source's wait
	// for the last page ends, as a killed CRIU's would.
	for _, d := range lazies {
		d.End()
	}
}

var (
	_ job.Processes     = (*fakeNode)(nil)
	_ ckpt.Checkpointer = (*fakeNode)(nil)
	_ Prober            = (*fakeNode)(nil)
)

var errDead = errors.New("the agent crashed")

func (f *fakeNode) proc(pid int, tix uint64) *fproc {
	p := f.w.procs[pid]
	if p == nil || p.node != f.name || p.state == gone || (tix != 0 && p.tix != tix) {
		return nil
	}
	return p
}

// ---- Processes ----

func (f *fakeNode) Start(s job.Spec) (*job.Proc, error) {
	if f.dead.Load() {
		return nil, errDead
	}
	if len(s.Argv) == 0 {
		return nil, errors.New("no program")
	}
	dir := f.SpoolDir(s.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for _, n := range []string{"stdout", "stderr"} {
		if err := os.WriteFile(filepath.Join(dir, n), nil, 0o600); err != nil {
			return nil, err
		}
	}
	// A job with stdin gets a real pipe that it never reads.
	var stdin *os.File
	if s.Stdin {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		stdin = w
		f.w.mu.Lock()
		f.w.unread = append(f.w.unread, r)
		f.w.mu.Unlock()
	}
	f.w.mu.Lock()
	p := f.w.spawn(s.ID, f.name, dir, running)
	f.w.check(s.ID, "start")
	f.w.mu.Unlock()
	return &job.Proc{PID: p.pid, StartTix: p.tix, Dir: dir, Stdin: stdin, Wait: func() error { <-p.exit; return nil }}, nil
}

func (f *fakeNode) SpoolDir(id string) string { return filepath.Join(f.spool, id) }

func (f *fakeNode) Alive(pid int, tix uint64) bool {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	return f.proc(pid, tix) != nil
}

func (f *fakeNode) StartTicks(pid int) uint64 {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	if p := f.proc(pid, 0); p != nil {
		return p.tix
	}
	return 0
}

func (f *fakeNode) Signal(pid int, sig syscall.Signal) error {
	if f.dead.Load() {
		return errDead
	}
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	p := f.proc(pid, 0)
	if p == nil {
		return syscall.ESRCH
	}
	switch sig {
	case syscall.SIGSTOP:
		f.w.set(p, frozen, "sigstop")
		p.stopped = true
	case syscall.SIGCONT:
		f.w.set(p, running, "sigcont")
		p.stopped = false
	case syscall.SIGKILL:
		f.w.ended[p.job] = true
		f.w.set(p, gone, "sigkill")
	default:
		// roam-init forwards it, the program ends, roam-init writes
		// its status.
		f.w.ended[p.job] = true
		_ = os.WriteFile(filepath.Join(p.spool, "status"), []byte(strconv.Itoa(128+int(sig))+"\n"), 0o600)
		f.w.set(p, gone, "signal")
	}
	return nil
}

func (f *fakeNode) Kill(pid int, tix uint64, _ time.Duration) {
	if f.dead.Load() {
		return
	}
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	if p := f.proc(pid, tix); p != nil {
		f.w.set(p, gone, "kill")
	}
}

// outsideCPU says whether a running copy of job id was restored and not
// settled into its CPU group.
func (w *world) outsideCPU(id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.procs {
		if p.job == id && p.state == running && p.outsideCPU {
			return true
		}
	}
	return false
}

func (f *fakeNode) Settle(id string, pid int) error {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	if f.w.settleFail > 0 {
		f.w.settleFail--
		return errors.New("fake settle: refused")
	}
	for _, p := range f.w.procs {
		if p.pid == pid && p.job == id {
			p.outsideCPU = false
		}
	}
	return nil
}

func (f *fakeNode) Owner(pid int) (uint32, bool) { return 0, true }
func (f *fakeNode) StdinKey(pid int) string      { return "" }
func (f *fakeNode) Tidy()                        {}

func (f *fakeNode) Stopped(pid int) bool {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	p := f.proc(pid, 0)
	return p != nil && p.stopped && p.state == frozen
}

func (f *fakeNode) Usage(id string, pid int) (float64, float64) {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	f.w.account()
	if p := f.proc(pid, 0); p != nil {
		return p.cpu, 10
	}
	return 0, 10
}

func (f *fakeNode) Activity(pid int) (int, uint64, float64) {
	f.mu.Lock()
	hook := f.onActivity
	f.mu.Unlock()
	if hook != nil {
		hook()
	}
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	if p := f.proc(pid, 0); p != nil && p.state == running {
		return 1, 0, 10
	}
	return 0, 0, 10
}

// ---- Prober ----

// Runnable counts the node's running processes. A fake job is one
// process, standing for its roam-init and its program at once, so skip
// (the inits) is not applied: the node's load is its jobs.
func (f *fakeNode) Runnable(skip map[int]uint64) int {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	n := 0
	for _, p := range f.w.procs {
		if p.node == f.name && p.state == running {
			n++
		}
	}
	return n
}

func (f *fakeNode) MemFreeMB() float64 { return 4096 }

// ---- Checkpointer ----

func (f *fakeNode) Support() (string, bool) { return "fake checkpointer", true }

// Inspect: a job stopped by roam kill -s STOP has its program (pid 1 in
// its namespace, here) stopped; once frozen, frozenPin pins it.
func (f *fakeNode) Inspect(pid int, members map[string]bool, frozen bool) migrate.Verdict {
	var v migrate.Verdict
	f.w.mu.Lock()
	if p := f.proc(pid, 0); p != nil && p.stopped {
		v.Stopped = []int{1}
	}
	f.w.mu.Unlock()
	if frozen {
		f.mu.Lock()
		v.Pin, v.Files = f.frozenPin, f.restoredFiles
		f.mu.Unlock()
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

// image is what a fake dump writes.
type image struct {
	Job   string `json:"job"`
	Pages int    `json:"pages"`
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
	b, _ := json.Marshal(image{Job: p.job, Pages: f.w.pageBytes})
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
func (f *fakeNode) Checkpoint(pid int, dir string, mounts []string) error {
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
	if f.dead.Load() {
		return nil, errDead
	}
	ours, theirs := net.Pipe()
	s := &fakeSink{ours: theirs, done: make(chan struct{})}
	f.mu.Lock()
	f.sinks = append(f.sinks, s)
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
	p := f.w.spawn(img.Job, f.name, s.Mounts[ckpt.JobDir], frozen)
	p.outsideCPU = s.LeaveCPU
	f.w.counts["restore"]++
	f.w.check(img.Job, "restore")
	return p.pid, nil
}

func (f *fakeNode) Thaw(pid int, keep []int) {
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
