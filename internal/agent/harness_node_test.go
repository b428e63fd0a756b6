package agent

// The tests' fake node: per node the Processes, Checkpointer and Prober
// an agent is given, over a world of fake processes (the "kernel"). The
// in-process cluster harness shares one world among its nodes, which
// checks the invariant on every change of a copy: never two running
// copies of a job, never none. The fuzz harness gives its one node a
// world of its own where every start, page server, dump and restore
// fails and the clock stands still (newFzNode). A node records what its
// agent asked of it, for the tests to check.

import (
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

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
	uid   uint32 // the job's owner, whom its tasks run as
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
	// gaps are jobs that may have no copy for a while: a fence killed
	// the old one before its home restarts it.
	gaps   map[string]bool
	broken []string // invariant violations, in order
	counts map[string]int
	// odds of a failed dump and a failed restore
	dumpFail, restoreFail float64
	// odds of a failed start and of a page server (Sink, LazyPages)
	// that fails to start: drawn only when set, so that a world without
	// them draws from rng as it always did
	startFail, pagesFail float64
	// settleFail: how many Settle calls fail before one moves the job
	settleFail int
	// how long a dump and a restore take (fake time)
	dumpTime, restoreTime time.Duration
	// dumping: dumps running now; maxDumping, the most at once
	dumping, maxDumping int
	pageBytes           int
	unread              []*os.File // the read ends of jobs' stdin pipes
	// now is the world's clock, which gives the processes their CPU time
	// (account): time.Now, the bubble's under synctest.
	now func() time.Time
}

func newWorld(seed int64) *world {
	return &world{rng: rand.New(rand.NewSource(seed)), next: 100, procs: map[int]*fproc{}, ended: map[string]bool{}, cutOff: map[string]bool{}, gaps: map[string]bool{},
		counts: map[string]int{}, pageBytes: 4096, now: time.Now}
}

// fails draws whether a step whose odds of failing are odds fails, and
// counts it as what when it does. w.mu held.
func (w *world) fails(odds float64, what string) bool {
	if odds > 0 && w.rng.Float64() < odds {
		w.counts[what]++
		return true
	}
	return false
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
	if run > 1 || all == 0 && !w.gaps[id] {
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

func (w *world) spawn(id, node, spool string, uid uint32, st byte) *fproc {
	w.next++
	if w.next == os.Getpid() {
		// The agent's own pid, whose start StartTicks answers as the
		// agent's: never a fake process's.
		w.next++
	}
	p := &fproc{pid: w.next, tix: uint64(w.next) * 7, job: id, node: node, spool: spool, uid: uid, state: st, exit: make(chan struct{})}
	w.procs[p.pid] = p
	return p
}

// account gives every running process its share of its node's CPU (one
// CPU a node, shared equally) since the last call, with the processes
// running now: Usage calls it, at every round of a node's scheduler, so
// the shares of a second or so are approximate, which a fake may be.
// w.mu held.
func (w *world) account() {
	now := w.now()
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
	// What the agent asked of it, whatever came of it: the jobs it was
	// to start, the signals and kills it was to send, the restores and
	// the page servers (Sink) it was to start.
	started  []job.Spec
	signals  []sentSignal
	kills    []int
	restores []ckpt.RestoreSpec
	sinks    int
	// oomKills are the processes the OOM killer killed in each job's
	// group, as a test says.
	oomKills map[string]int64
	// onRestore, when set, runs as a restore is asked (before anything
	// is restored).
	onRestore func(ckpt.RestoreSpec)
	// onDump, when set, runs as an eager dump is asked, before anything
	// is dumped: an error is the dump's.
	onDump func(pid int) error
	// onThaw, when set, runs as a thaw is asked (before anything thaws).
	onThaw  func(pid int)
	servers []*fakeSink // the page servers it started
	// lazies are the lazy dumps it started, serving pages.
	lazies []*fakeLazy
	// pin, when set, is what the rules say of every job here, frozen or
	// not (frozenPin, when set, says it once frozen).
	pin string
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
	// threads, when set, are the node's runnable threads (thread id to
	// its start time) in place of its running processes, and skip what
	// Runnable was last told to leave out of them.
	threads, skip map[int]uint64
	// peakMB is the peak memory its job cgroups count (PeakMB).
	peakMB float64
	// startTakes, when set, is how long each start takes (fake time), as
	// a roam-init setting a job up does.
	startTakes time.Duration
}

// sentSignal is a signal the agent sent to a process.
type sentSignal struct {
	pid int
	sig syscall.Signal
}

// crash is the agent's process dying: nothing it holds acts again, and
// the kernel closes its descriptors (its page servers' sockets).
func (f *fakeNode) crash() {
	f.dead.Store(true)
	f.mu.Lock()
	sinks, lazies := f.servers, f.lazies
	f.servers, f.lazies = nil, nil
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
	f.mu.Lock()
	f.started = append(f.started, s)
	takes := f.startTakes
	f.mu.Unlock()
	time.Sleep(takes)
	if f.dead.Load() {
		return nil, errDead
	}
	f.w.mu.Lock()
	failed := f.w.fails(f.w.startFail, "start-fault")
	f.w.mu.Unlock()
	if failed {
		return nil, errors.New("fake start: injected fault")
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
	p := f.w.spawn(s.ID, f.name, dir, s.UID, running)
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
	if pid == os.Getpid() {
		// The agent asks when it started (fencing.New): now, after every
		// process spawned so far and before every later one, as a real
		// agent's start is.
		f.w.next++
		return uint64(f.w.next) * 7
	}
	if p := f.proc(pid, 0); p != nil {
		return p.tix
	}
	return 0
}

func (f *fakeNode) Signal(pid int, sig syscall.Signal) error {
	f.mu.Lock()
	f.signals = append(f.signals, sentSignal{pid, sig})
	f.mu.Unlock()
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
	f.mu.Lock()
	f.kills = append(f.kills, pid)
	f.mu.Unlock()
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

func (f *fakeNode) Owner(pid int) (uint32, bool) {
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	if p := f.proc(pid, 0); p != nil {
		return p.uid, true
	}
	return 0, false
}

func (f *fakeNode) StdinKey(pid int) string { return "" }
func (f *fakeNode) Tidy(func(string) bool)  {}

func (f *fakeNode) PeakMB(id string) float64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.peakMB
}

// OOMKills is what a test set in oomKills: the kernel's OOM killer acted
// in job id's group.
func (f *fakeNode) OOMKills(id string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.oomKills[id]
}

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
	// A cgroup's count outlives the job's processes: an ended job's too.
	if p := f.w.procs[pid]; p != nil && p.node == f.name && p.job == id {
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
// (the inits) is not applied: the node's load is its jobs. A node given
// its threads counts those instead, as probe.Node does: those in skip
// with the same start time left out.
func (f *fakeNode) Runnable(skip map[int]uint64) int {
	f.mu.Lock()
	if f.threads != nil {
		defer f.mu.Unlock()
		f.skip = skip
		n := 0
		for t, start := range f.threads {
			if s, ok := skip[t]; !ok || s != start {
				n++
			}
		}
		return n
	}
	f.mu.Unlock()
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
