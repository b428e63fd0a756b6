package ckpt

// The checkpointer seam: what an agent needs of CRIU to move a job, as an
// interface, and Host, the real one (CRIU on this machine). The agent's
// in-process test harness has a fake beside it that records which copies
// of a job exist and which run.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"roam/internal/api"
	"roam/internal/cgroup"
	"roam/internal/execlock"
	"roam/internal/migrate"
	"roam/internal/netx"
	"roam/internal/procfs"
	"roam/internal/proctext"
	"roam/internal/resources"
)

// Checkpointer freezes, dumps and restores jobs. A job is named by the pid
// of its roam-init; every call acts on its whole process tree.
type Checkpointer interface {
	// Support says, once at start, what migration can do on this node, and
	// whether jobs of every user can migrate (or only root's).
	Support() (what string, allUsers bool)
	// Inspect reads what /proc says of a job and applies the pin rules
	// (migrate.Judge): the files the destination must reach, or why the
	// job cannot move. frozen: the job is frozen by its dump (see
	// migrate.Rules.Frozen).
	Inspect(pid int, members map[string]bool, frozen bool) migrate.Verdict
	// Creds are the credentials of every thread of the tree under pid.
	Creds(pid int) ([]proctext.Creds, error)
	// Mounts lists the job's mount points CRIU must treat as external.
	Mounts(pid int) ([]string, error)
	// Dump freezes the job and dumps it into dir, its memory pages to
	// pages (a stream to the destination's Sink) as they are read; the job
	// is left frozen. It returns once pages has ended: the caller cuts a
	// stream that stalls.
	Dump(pid int, dir string, mounts []string, pages net.Conn) (Times, error)
	// Checkpoint freezes job id (roam-init pid) and dumps it whole, its
	// pages included, into dir; the job is left frozen. CRIU's work for
	// it runs as the job's does (Host.asJob).
	Checkpoint(id string, pid int, dir string, mounts []string) error
	// DumpLazy freezes the job, dumps all but its pages into dir, and
	// returns once those images are written; the pages are then served
	// until the LazyDump ends. The job is left frozen.
	DumpLazy(pid int, dir string, mounts []string) (LazyDump, Times, error)
	// Sink starts a page server that writes the pages of a Dump into dir.
	Sink(dir string) (Sink, error)
	// LazyPages starts, for a lazy restore from dir, the daemon that
	// fetches pages from the source through connections made by dial; it
	// returns once the daemon is ready, and done is closed when it ends.
	LazyPages(dir string, dial func() (net.Conn, error)) (done <-chan struct{}, stop func(), err error)
	// Restore restores the job in spec.Dir, frozen, in this node's
	// cgroups, and returns its roam-init's pid. Dump, DumpLazy and
	// Restore say where their time went, also when they fail.
	Restore(spec RestoreSpec) (int, Times, error)
	// Thaw resumes a frozen job: all its processes but those whose pid in
	// the job's namespace is in keep (they were stopped before).
	Thaw(pid int, keep []int)
	// Settle finishes a restore made with RestoreSpec.LeaveCPU, once the
	// job runs, and puts back a job a failed Dump or DumpLazy took out of
	// its CPU group, before it resumes: its processes go into its CPU
	// group.
	Settle(id string, pid int) error
	// StoppedCopies lists the frozen copies of job id whose job directory
	// is spool: copies a restore left that no record names.
	StoppedCopies(id, spool string) []int
}

// LazyDump is a lazy dump serving its pages.
type LazyDump interface {
	// Pages connects to the page server (one connection a call).
	Pages() (net.Conn, error)
	// Wait returns once every page is served, or the dump failed.
	Wait() error
	// End stops serving (a failed migration) and returns once the dump
	// has ended. Safe to call twice and after Wait.
	End()
}

// Sink is a destination's page server for one eager dump.
type Sink interface {
	// Conn is the page server's end for the dump's page stream.
	Conn() net.Conn
	// Done is closed when the page server has ended; Err then says how.
	Done() <-chan struct{}
	Err() error
	// Stop ends the page server and returns once it has.
	Stop()
}

// RestoreSpec says what to restore.
type RestoreSpec struct {
	ID  string // the job's id
	Dir string // images directory
	// Mounts maps each external mount point of the dump to the path on
	// this node to bind there; JobDir maps to the job's spool here.
	Mounts map[string]string
	// Inherit maps a resource of the dumped job ("pipe:[INODE]") to the
	// file that replaces it.
	Inherit map[string]*os.File
	// Lazy restores with pages fetched by the LazyPages daemon for Dir.
	Lazy bool
	// LeaveCPU leaves the restored job in the CPU controller's root; the
	// caller moves it into its CPU group with Settle once it runs (a
	// move costs the kernel an RCU grace period, some 10 ms, which the
	// job would otherwise spend stopped).
	LeaveCPU bool
	// Req is the job's resource request: its cgroup here gets the limits
	// of it (cgroup.Jobs.Enter), before CRIU restores into it.
	Req resources.Request
	// UID owns the job, and Slurm is the Slurm job it serves ("": none),
	// into whose extern step here it is restored (Host.SlurmRoots).
	UID   uint32
	Slurm string
	// Check, when set, judges the restored tree under the pid it gets
	// while CRIU still holds every task under ptrace, their credentials,
	// descriptors and memory as they will run (CRIU's pre-resume
	// notification). An error ends the restore: the tasks are killed, none
	// having run, and Restore returns it. A check after Restore would come
	// after CRIU let the tasks go, stopped: a SIGCONT from a process of the
	// owner's on this host could run them first.
	Check func(pid int) error
}

// Host is the Checkpointer of a real node: CRIU, with the node's cgroup.
type Host struct {
	CRIU   CRIU
	Layout cgroup.Layout
	// Shared are the directories every node has at the same path (a job
	// with a file or working directory elsewhere is pinned).
	Shared []string
	// GhostLimit is the largest deleted file a job may hold and move
	// (CRIU's ghost file limit).
	GhostLimit int64
	// Jobs are the job's cgroups; nil when the host has no cgroup
	// controllers roam can use (jobs then stay in the agent's).
	Jobs *cgroup.Jobs
	// UserNS: users' jobs run in user namespaces of their own
	// (job.Launcher.UserNS); NoUserNS says why not, when known
	// (job.UserNSAllowed).
	UserNS   bool
	NoUserNS error
	// SlurmRoots, when set, are the groups of a Slurm job's extern step
	// here, by v1 controller ("" for v2's one), each a path below the
	// hierarchy's mount: a job that serves the Slurm job is restored into
	// them (nil: this node serves no Slurm jobs).
	SlurmRoots func(uid uint32, job string) (map[string]string, error)
}

var _ Checkpointer = (*Host)(nil)

// lazyPipeSize is the pipe size CRIU's lazy page server asks for.
const lazyPipeSize = 8 << 20

// Support finds out what migration can do on this host, so that a limit
// shows in the log and in `roam stats` instead of at the first migration:
//   - CRIU answers over RPC, and which version;
//   - how users' jobs move: in user namespaces of their own, where root
//     holds every capability CRIU needs; else only where root holds
//     CAP_SYS_RESOURCE, without which root's CRIU cannot read a non-root
//     process's rlimits, so only root-owned jobs migrate;
//   - lazy migration: CRIU's page server needs pipes of lazyPipeSize, which
//     without CAP_SYS_RESOURCE the kernel allows only up to
//     fs.pipe-max-size, so it raises that sysctl; and of users' jobs in
//     user namespaces, whether a restore can make a userfaultfd in one
//     (LazyInUserNS).
func (h *Host) Support() (string, bool) {
	v, err := h.CRIU.Version()
	if err != nil {
		return fmt.Sprintf("no migration: criu at %s does not answer: %v", h.CRIU.Path, err), false
	}
	ver := fmt.Sprintf("criu %d.%d.%d", v/10000, v/100%100, v%100)
	if v < 40200 {
		ver += " (older than 4.2: jobs with inet sockets fail to dump on kernels >= 6.16)"
	}
	ver += "; " + KerndatState(KerndatDir, h.CRIU.Path)
	users, all := "users' jobs run in user namespaces of their own, where root's CRIU moves them", true
	why := "users' jobs run in the host's user namespace"
	if h.NoUserNS != nil {
		why = h.NoUserNS.Error()
	}
	switch {
	case h.UserNS:
	case hasCapSysResource():
		users = why + "; jobs of every user migrate"
	default:
		users, all = why+", and root lacks CAP_SYS_RESOURCE, so only root-owned jobs migrate here", false
	}
	// A lazy restore of a user's job makes its userfaultfd inside the
	// job's user namespace (LazyInUserNS).
	on := "lazy migration on"
	if h.UserNS {
		if ok, err := LazyInUserNS(h.CRIU.Path); !ok {
			on = fmt.Sprintf("lazy migration on for root's jobs only: a user's job cannot be restored lazily here (%v)", err)
		}
	}
	if hasCapSysResource() {
		return ver + "; " + users + "; " + on, all
	}
	lazy := on
	if cur := pipeMaxSize(); cur < lazyPipeSize {
		if err := os.WriteFile("/proc/sys/fs/pipe-max-size", []byte(strconv.Itoa(lazyPipeSize)), 0o644); err != nil {
			lazy = fmt.Sprintf("lazy migration off (fs.pipe-max-size is %d and cannot be raised: %v)", cur, err)
		} else {
			lazy = fmt.Sprintf("%s (raised fs.pipe-max-size from %d to %d)", on, cur, lazyPipeSize)
		}
	}
	return ver + "; " + users + "; " + lazy, all
}

// hasCapSysResource reads CapEff of this process (bit 24).
func hasCapSysResource() bool {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "CapEff:"); ok {
			c, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return err == nil && c&(1<<24) != 0
		}
	}
	return false
}

func pipeMaxSize() int {
	n, _ := procfs.ReadInt("/proc/sys/fs/pipe-max-size")
	return n
}

// Inspect reads what /proc says of the job's processes (their status,
// working directories, descriptors with their fdinfo, mappings) and its
// TCP table, and applies the pin rules (migrate.Judge). The files it
// lists carry the keys CRIU's dump names them by (files.go).
func (h *Host) Inspect(pid int, members map[string]bool, frozen bool) migrate.Verdict {
	view := readView(pid, frozen)
	v := migrate.Judge(view, migrate.Rules{JobDir: JobDir, Shared: h.Shared, Members: members, GhostLimit: h.GhostLimit, Frozen: frozen})
	if v.Pin != "" {
		return v
	}
	ext, err := viewExternals(view, frozen)
	if err == nil {
		v.Files, err = migrate.WithKeys(v.Files, ext, h.Shared)
	}
	if err != nil {
		return migrate.Verdict{Pin: err.Error()}
	}
	return v
}

// ReadView reads what the pin rules look at of the tree under pid.
func ReadView(pid int) migrate.View { return readView(pid, false) }

// readView is ReadView; still says the tree's tasks are stopped (frozen
// for a dump, or restored and not yet resumed), so that a descriptor,
// mapping or working directory whose path reads differently before and
// after its stat was renamed meanwhile, by someone else: it cannot be
// examined (StatErr), rather than a running task's descriptor closed and
// opened again as another file. Skipped, a rename loop in a directory the
// user owns would hide the file from the checks.
func readView(pid int, still bool) migrate.View {
	var v migrate.View
	tree := procfs.Tree(pid)
	sockets := false
	for _, p := range tree {
		proc := "/proc/" + strconv.Itoa(p)
		before, err := procfs.ReadStat(p)
		status, err2 := os.ReadFile(proc + "/status")
		if err != nil || err2 != nil || before.State == 'Z' {
			continue // ended
		}
		t := migrate.Task{PID: p, Status: string(status), Cwd: entry(proc+"/cwd", "", still)}
		dir := proc + "/fd/"
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			f := entry(dir+e.Name(), proc+"/fdinfo/"+e.Name(), still)
			if f.Link == "" {
				continue
			}
			sockets = sockets || strings.HasPrefix(f.Link, "socket:[")
			t.FDs = append(t.FDs, f)
		}
		maps, _ := os.ReadFile(proc + "/maps")
		for _, m := range migrate.FileMappings(string(maps)) {
			e := entry(proc+"/map_files/"+m.Range, "", still)
			e.Link = m.Path
			t.Maps = append(t.Maps, migrate.MapEntry{Mapping: m, Entry: e})
		}
		// A process that ended while it was read (a job's short-lived
		// child) holds nothing any more, and what was read of it may be
		// half: a stat of its file that failed after the link was read.
		if after, err := procfs.ReadStat(p); err != nil || after.State == 'Z' || after.StartTime != before.StartTime {
			continue
		}
		v.Tasks = append(v.Tasks, t)
	}
	if len(tree) > 0 {
		root := "/proc/" + strconv.Itoa(tree[0])
		if sockets {
			for _, f := range []string{"tcp", "tcp6"} {
				if b, err := os.ReadFile(root + "/net/" + f); err == nil {
					v.TCP = append(v.TCP, migrate.EstablishedTCP(string(b))...)
				}
			}
		}
		// The directories of the deleted files (see migrate.View.Dirs).
		addDir := func(f migrate.Entry) {
			if f.Mode&syscall.S_IFMT != syscall.S_IFREG || f.Nlink != 0 || !strings.HasPrefix(f.Link, "/") {
				return
			}
			dir := filepath.Dir(strings.TrimSuffix(f.Link, " (deleted)"))
			if _, ok := v.Dirs[dir]; ok {
				return
			}
			if v.Dirs == nil {
				v.Dirs = map[string]migrate.Entry{}
			}
			e := migrate.Entry{Link: dir}
			var st syscall.Stat_t
			if syscall.Lstat(dir, &st) == nil {
				fillEntry(&e, dir, &st)
			}
			v.Dirs[dir] = e
		}
		for _, t := range v.Tasks {
			for _, f := range t.FDs {
				addDir(f)
			}
			for _, m := range t.Maps {
				addDir(m.Entry)
			}
		}
		// The calling thread's: MQueues leaves threads in other namespaces
		// (and ends them).
		mine, err1 := os.Readlink("/proc/thread-self/ns/ipc")
		its, err2 := os.Readlink(root + "/ns/ipc")
		v.OwnIPC = err1 == nil && err2 == nil && mine != its
		if v.OwnIPC {
			v.MQueues, err1 = MQueues(tree[0])
			if err1 != nil {
				v.MQueueErr = err1.Error()
			}
		}
	}
	return v
}

// fillEntry sets what stat (st, of path p) and statfs say of a file.
func fillEntry(e *migrate.Entry, p string, st *syscall.Stat_t) {
	e.Mode, e.Nlink, e.Size, e.Alloc, e.Ino, e.UID = st.Mode, st.Nlink, st.Size, st.Blocks*512, st.Ino, st.Uid
	var sfs syscall.Statfs_t
	if syscall.Statfs(p, &sfs) == nil {
		e.FSID = [2]int32{int32(sfs.Fsid.X__val[0]), int32(sfs.Fsid.X__val[1])}
		e.FSType = sfs.Type
	}
}

// readlink is os.Readlink; a test makes a link change between two reads.
var readlink = os.Readlink

// entry reads a /proc link, stats its target, and reads info (an fdinfo
// file) when named. A link that cannot be read (an ended task) comes back
// empty; one that is not a path (a socket, a pipe) with Mode 0; a path
// whose stat fails with StatErr, and so does one that changed as it was
// read when the task is still (see readView).
func entry(link, info string, still bool) migrate.Entry {
	l, err := readlink(link)
	if err != nil {
		return migrate.Entry{}
	}
	e := migrate.Entry{Link: l}
	if info != "" {
		if b, err := os.ReadFile(info); err == nil {
			e.Info = string(b)
		}
	}
	if !strings.HasPrefix(l, "/") {
		return e
	}
	var st syscall.Stat_t
	err = syscall.Stat(link, &st)
	// The task may end, or its pid go to another task, between the
	// readlink and the stat (a job's shell starts short-lived children
	// all the time): a link that no longer reads as it did is an ended
	// task's, not a file that cannot be examined nor another file.
	if again, rerr := readlink(link); rerr != nil || again != l {
		if still && rerr == nil {
			e.StatErr = "its path changed while it was read (renamed, as " + again + ")"
			return e
		}
		return migrate.Entry{}
	}
	if err != nil {
		e.StatErr = err.Error()
		return e
	}
	fillEntry(&e, link, &st)
	return e
}

// Creds reads every thread's credentials in the tree under pid.
func (h *Host) Creds(pid int) ([]proctext.Creds, error) { return procfs.TreeCreds(pid) }

// Mounts is the package's Mounts.
func (h *Host) Mounts(pid int) ([]string, error) { return Mounts(pid) }

// Dump dumps with the pages going through a Unix socket pair (CRIU's end
// a descriptor it inherits) spliced to pages.
func (h *Host) Dump(pid int, dir string, mounts []string, pages net.Conn) (Times, error) {
	ours, theirs, err := netx.SocketPair()
	if err != nil {
		return nil, err
	}
	spliced := make(chan struct{})
	go func() {
		netx.Splice(ours, pages, ours, nil)
		close(spliced)
	}()
	var lift sync.WaitGroup
	dumped := make(chan struct{})
	times, err := h.CRIU.Dump(DumpOpts{PID: pid, Dir: dir, Mounts: mounts, PageConn: theirs, GhostLimit: h.GhostLimit, External: h.external(pid, dir),
		Started: func(worker int) { h.lift(pid, worker, dumped, &lift) }})
	close(dumped)
	lift.Wait()
	theirs.Close()
	if err != nil {
		ours.Close()
		pages.Close()
	}
	// The destination closes its end once its page server has ended; a
	// peer that never does is the caller's stall guard's to cut.
	t := time.Now()
	<-spliced
	return append(times, api.Phase{Name: "page stream end", MS: ms(time.Since(t)), Frozen: true}), err
}

// lift moves the processes of the job under pid out of the node's CPU
// group (cgroup v1) for a dump that moves the job, as CRIU's worker
// starts: CRIU stops each thread (each must run to stop) and its parasite
// reads the job's memory from inside the job, and under the node's CFS
// quota that work waits behind the node's other jobs (on a loaded node of
// 0.2 CPU a small job's dump froze it for 836 ms). The job runs outside
// its quota until the worker holds it, which a goroutine of wg watches:
// if the worker has not held the whole job by liftLimit (a thread that
// does not stop), or by the time done is closed, the whole job goes back. A copy the migration ends is killed; one
// that resumes after a failed dump is put back (Settle) before the
// agent's resume. The group is a leaf of its own beside the group whose
// quota the job shares ("roam/c/n1" gives "roam/c/n1.dump"), never the
// root: CRIU records the groups under a task's group in the images, and
// the restore makes them again. Every process of the job moves before
// the worker reads any group: a restore maps the groups of the image by the
// root task's, and a job split between two groups did not restore. Where
// no quota limits the job's group, or under v2 (a job's group holds its
// memory too), it does nothing.
func (h *Host) lift(pid, worker int, done <-chan struct{}, wg *sync.WaitGroup) {
	if h.Jobs == nil || worker <= 0 {
		return
	}
	top := h.Layout.Throttler(h.Jobs.Parent)
	if top == "" {
		return
	}
	to := top + ".dump"
	if err := os.MkdirAll(filepath.Join(h.Layout.CPU, to), 0o755); err != nil {
		return // best effort: the dump works either way
	}
	_ = h.moveTree(pid, to) // best effort, as above
	deadline := time.Now().Add(liftLimit)
	wg.Go(func() {
		// A process counts once seen held: CRIU then runs its parasite in
		// it, and it shows running. A zombie never stops.
		held := map[int]bool{}
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			tree := procfs.Tree(pid)
			all := len(tree) > 0
			for _, p := range tree {
				if !held[p] {
					st, err := procfs.ReadStat(p)
					held[p] = err == nil && st.State == 'Z' || procfs.HeldBy(p, worker)
				}
				all = all && held[p]
			}
			if all {
				return
			}
			select {
			case <-done:
			case <-tick.C:
				if time.Now().Before(deadline) {
					continue
				}
			}
			// CRIU has not stopped the whole job, so it has read none of
			// its groups yet: the whole job goes back, never a part.
			_ = h.moveTree(pid, h.Jobs.Parent)
			return
		}
	})
}

// liftLimit bounds how long a lifted job may run before CRIU's worker
// holds it (CRIU itself waits up to 10 s for a thread to stop).
const liftLimit = 500 * time.Millisecond

// Checkpoint dumps job id (its roam-init pid) whole into dir and leaves
// it frozen.
func (h *Host) Checkpoint(id string, pid int, dir string, mounts []string) error {
	_, err := h.CRIU.Dump(DumpOpts{PID: pid, Dir: dir, Mounts: mounts, GhostLimit: h.GhostLimit, External: h.external(pid, dir),
		Started: func(worker int) { h.asJob(id, pid, worker) }})
	return err
}

// asJob puts CRIU's worker for a checkpoint of job id (roam-init pid)
// where the job's own work runs: at roam-init's nice, and under cgroup v1
// in the CPU group the job runs in, so that its CPU counts against the
// job's quota and shares the node's jobs' part. A checkpoint is work its
// user asked for (--checkpoint-every, roam checkpoint): at the agent's
// nice and in the agent's group, a user's checkpoints ran ahead of every
// job of the node, other users' too, on CPU none of their jobs had. A
// migration's dump runs ahead on purpose (cmd/roamd's agentNice, lift):
// each of its milliseconds is one the job stands frozen for the cluster's
// balance. Under v2 a job's group holds its memory too, which CRIU's
// would eat into: the worker stays, at the job's nice. Best effort: the
// dump works either way.
func (h *Host) asJob(id string, pid, worker int) {
	nice := 0
	if st, err := procfs.ReadStat(pid); err == nil {
		nice = st.Nice
	}
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, worker, nice)
	if h.Jobs != nil && !h.Layout.V2 && h.Layout.CPU != "" {
		_ = h.Layout.AddCPUProc(h.Jobs.CPURel(id), worker)
	}
}

// external is a dump's DumpOpts.External: every regular file of the job
// under pid, the deleted ones' content written into dir. CRIU then opens
// none of them by path at the restore, and makes no ghost file: the
// destination hands it descriptors it opened, or made, as the job's owner
// (docs/criu-files.md). One path for every job, root's too: it costs no
// time (docs/security.md), and a job restored so holds files on the
// agent's mounts, not its own, that CRIU could not name by path at its
// next dump ("Can't lookup mount").
func (h *Host) external(pid int, dir string) func() ([]string, error) {
	return func() ([]string, error) { return declare(pid, dir, h.GhostLimit) }
}

// lazyDump is a CRIU dump serving pages on one end of a socket pair.
type lazyDump struct {
	mu    sync.Mutex
	pages net.Conn      // the other end; nil once taken
	taken net.Conn      // the end once taken, closed by End
	done  chan struct{} // closed when CRIU's dump call ended
	err   error         // its result, once done
}

// DumpLazy starts CRIU's dump with a page server on a socket pair: no
// port, so no process on the node can reach it.
func (h *Host) DumpLazy(pid int, dir string, mounts []string) (LazyDump, Times, error) {
	ours, theirs, err := netx.SocketPair()
	if err != nil {
		return nil, nil, err
	}
	d := &lazyDump{pages: ours, done: make(chan struct{})}
	ready := make(chan struct{})
	var readyOnce sync.Once
	t0 := time.Now()
	var started atomic.Int64 // since t0, once CRIU's worker runs
	// The job is lifted out of its CPU group until its images are written.
	var lift sync.WaitGroup
	lifted := make(chan struct{})
	var liftOnce sync.Once
	endLift := func() { liftOnce.Do(func() { close(lifted) }) }
	go func() {
		_, d.err = h.CRIU.Dump(DumpOpts{PID: pid, Dir: dir, Mounts: mounts, Lazy: true, GhostLimit: h.GhostLimit, External: h.external(pid, dir),
			PageConn: theirs, Ready: func() { endLift(); readyOnce.Do(func() { close(ready) }) },
			Started: func(worker int) {
				started.Store(int64(time.Since(t0)))
				h.lift(pid, worker, lifted, &lift)
			}})
		endLift()
		lift.Wait()
		theirs.Close()
		close(d.done)
	}()
	// CRIU's own statistics come at the end of the dump, after the last
	// page: from its start until the images are ready is one part.
	times := func() Times {
		s := time.Duration(started.Load())
		return Times{{Name: "criu start", MS: ms(s)}, {Name: "criu dump", MS: ms(time.Since(t0) - s), Frozen: true}}
	}
	select {
	case <-ready:
		return d, times(), nil
	case <-d.done:
		ours.Close()
		times := times()
		if d.err == nil {
			return nil, times, errors.New("criu dump ended before its images were ready")
		}
		return nil, times, d.err
	}
}

// Pages hands out the page server's socket, once: CRIU serves one
// lazy-pages daemon.
func (d *lazyDump) Pages() (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.pages == nil {
		return nil, errors.New("the page server's connection is taken")
	}
	c := d.pages
	d.pages, d.taken = nil, c
	return c, nil
}

func (d *lazyDump) Wait() error {
	<-d.done
	return d.err
}

// End stops CRIU's page server by closing its socket (CRIU then ends its
// dump call).
func (d *lazyDump) End() {
	d.mu.Lock()
	for _, c := range []net.Conn{d.pages, d.taken} {
		if c != nil {
			c.Close()
		}
	}
	d.mu.Unlock()
	<-d.done
}

// pageSink is `criu page-server` reading from a socket pair.
type pageSink struct {
	conn net.Conn
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Sink starts `criu page-server` on a socket pair, writing into dir.
func (h *Host) Sink(dir string) (Sink, error) {
	ours, theirs, err := netx.SocketPair()
	if err != nil {
		return nil, err
	}
	s := &pageSink{conn: ours, dir: dir, done: make(chan struct{})}
	s.cmd = exec.Command(h.CRIU.Path, "page-server", "--ps-socket", "3", "-D", dir, "-o", "page-server.log", "-v4")
	s.cmd.ExtraFiles = []*os.File{theirs}
	err = execlock.Start(s.cmd, h.CRIU.ExecMu)
	theirs.Close()
	if err != nil {
		ours.Close()
		return nil, fmt.Errorf("criu page-server: %w", err)
	}
	go func() {
		if err := s.cmd.Wait(); err != nil {
			s.err = fmt.Errorf("criu page-server: %s", LogError(filepath.Join(dir, "page-server.log"), err))
		}
		close(s.done)
	}()
	return s, nil
}

func (s *pageSink) Conn() net.Conn        { return s.conn }
func (s *pageSink) Done() <-chan struct{} { return s.done }
func (s *pageSink) Err() error            { return s.err }

func (s *pageSink) Stop() {
	s.conn.Close()
	_ = s.cmd.Process.Kill()
	<-s.done
}

// LazyPages runs `criu lazy-pages` on one end of a socket pair, the other
// carried to the source by dial: no port, so no process on the node can
// feed the restored job pages of its own.
func (h *Host) LazyPages(dir string, dial func() (net.Conn, error)) (<-chan struct{}, func(), error) {
	ours, theirs, err := netx.SocketPair()
	if err != nil {
		return nil, nil, err
	}
	// CRIU writes a byte on the status pipe once its socket for the
	// restore listens (no polling for the socket file).
	ready, readyW, err := os.Pipe()
	if err != nil {
		ours.Close()
		theirs.Close()
		return nil, nil, err
	}
	defer ready.Close()
	cmd := exec.Command(h.CRIU.Path, "lazy-pages", "--page-server", "--ps-socket", "3", "--status-fd", "4",
		"-D", dir, "-o", "lazy-pages.log", "-v4")
	cmd.ExtraFiles = []*os.File{theirs, readyW}
	err = execlock.Start(cmd, h.CRIU.ExecMu)
	theirs.Close()
	readyW.Close()
	if err != nil {
		ours.Close()
		return nil, nil, fmt.Errorf("criu lazy-pages: %w", err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		ours.Close()
		close(done)
	}()
	go func() {
		remote, err := dial()
		if err != nil {
			ours.Close()
			return
		}
		netx.Splice(ours, remote, ours, nil)
	}()
	stop := func() {
		_ = cmd.Process.Kill()
		<-done
	}
	_ = ready.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	n, err := ready.Read(b[:])
	switch {
	case n == 1:
		return done, stop, nil
	case errors.Is(err, os.ErrDeadlineExceeded):
		stop()
		return nil, nil, errors.New("criu lazy-pages did not start within 10 s")
	default: // it closed the pipe without saying it was ready: it ends
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			stop()
		}
		return nil, nil, fmt.Errorf("criu lazy-pages: %s", tail(filepath.Join(dir, "lazy-pages.log")))
	}
}

// tail is the last line of a log, for an error message.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// slurmRoots are the groups of the Slurm job s serves on this node, by
// controller (Host.SlurmRoots); nil for a job that serves none.
func (h *Host) slurmRoots(s RestoreSpec) (map[string]string, error) {
	if s.Slurm == "" {
		return nil, nil
	}
	if h.SlurmRoots == nil {
		return nil, fmt.Errorf("restore: job %s serves Slurm job %s, and this node serves no Slurm jobs (slurm.enabled)", s.ID, s.Slurm)
	}
	return h.SlurmRoots(s.UID, s.Slurm)
}

// Restore restores the job into its own cgroup (see cgroup.Jobs): into its
// memory group, so its pages are charged there from the start, but (cgroup
// v1) in the CPU controller's root, so that no CPU quota slows the
// restore; the job moves into its CPU group (the node's jobs') while it is
// still frozen, or, with LeaveCPU, once the caller resumed it (Settle).
// Under v2, where one group holds both, it goes straight into its own.
func (h *Host) Restore(s RestoreSpec) (int, Times, error) {
	var roots map[string]string
	var rel string
	var times Times
	slurmRoots, err := h.slurmRoots(s)
	if err != nil {
		return 0, nil, err
	}
	if h.Jobs != nil {
		t := time.Now()
		_, release, err := h.Jobs.Enter(s.ID, h.Jobs.LimitsFor(s.Req))
		times = append(times, api.Phase{Name: "job cgroup", MS: ms(time.Since(t))})
		if err != nil {
			return 0, times, err
		}
		defer release()
		rel = "/" + strings.TrimPrefix(h.Jobs.Rel(s.ID), "/")
		roots = map[string]string{"memory": rel, "cpu": "/"}
		if a := h.Layout.CPUAcct; a != "" && a != h.Layout.CPU && a != h.Layout.Memory {
			// A hierarchy of its own (mounted with cpu, it follows the
			// move into the CPU group below).
			roots["cpuacct"] = rel
		}
		if h.Layout.Pids != "" {
			// Bounded from the restore on: a job restored into CRIU's
			// own group would have no bound.
			roots["pids"] = rel
		}
		if h.Layout.V2 {
			roots = map[string]string{"": rel}
		}
	}
	if slurmRoots != nil && roots == nil {
		roots = map[string]string{}
	}
	for ctl, dir := range slurmRoots {
		roots[ctl] = dir
	}
	pid, ct, err := h.CRIU.Restore(RestoreOpts{Dir: s.Dir, Mounts: s.Mounts, Inherit: s.Inherit, Lazy: s.Lazy, CgroupRoots: roots, Check: s.Check})
	times = append(times, ct...)
	if err != nil {
		if rel != "" {
			h.killLeft(rel)
		}
		return 0, times, err
	}
	t := time.Now()
	err = rearmTimerfds(pid)
	times = append(times, api.Phase{Name: "timerfds", MS: ms(time.Since(t))})
	if err != nil {
		return pid, times, fmt.Errorf("restore: %w", err)
	}
	if !s.LeaveCPU {
		t := time.Now()
		err := h.Settle(s.ID, pid)
		times = append(times, api.Phase{Name: "cpu cgroup", MS: ms(time.Since(t))})
		if err != nil {
			return pid, times, err
		}
	}
	return pid, times, nil
}

// killLeft kills whatever a failed restore left in the job's cgroup rel
// (CRIU put the restored tasks there): the job does not run on this node,
// or it would not be restored here. The restore killed what it found of
// its own (killRestore); this takes what got away, as a task whose
// parent was killed first.
func (h *Host) killLeft(rel string) {
	for _, p := range h.Layout.Procs(rel) {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
}

// Settle moves a restored job's processes into its CPU group (cgroup v1;
// under v2 the restore put them there).
func (h *Host) Settle(id string, pid int) error {
	if h.Jobs == nil || h.Layout.V2 {
		return nil
	}
	return h.moveTree(pid, h.Jobs.CPURel(id))
}

// moveTree moves every process of the tree under pid into CPU group rel
// (cgroup v1). The job may run meanwhile: a child forked by a process not
// yet moved starts outside, so the tree is read again until a read finds
// no process that was not moved (a moved process's children start in the
// group). A process already there is left alone: a move costs an RCU
// grace period.
func (h *Host) moveTree(pid int, rel string) error {
	moved := map[int]bool{}
	var err error
	for range settlePasses {
		fresh := false
		for _, p := range procfs.Tree(pid) {
			if moved[p] {
				continue
			}
			fresh = true
			if inCPUGroup(p, rel) {
				moved[p] = true
				continue
			}
			if e := h.Layout.AddCPUProc(rel, p); e != nil {
				if _, gone := os.Stat("/proc/" + strconv.Itoa(p)); gone == nil {
					err = fmt.Errorf("move process %d into cgroup %s: %w", p, rel, e)
				}
				continue // tried again at the next read
			}
			moved[p] = true
		}
		if !fresh {
			return nil
		}
	}
	return err
}

// inCPUGroup says whether process pid is in CPU group rel (cgroup v1),
// from its /proc cgroup file.
func inCPUGroup(pid int, rel string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) == 3 && slices.Contains(strings.Split(f[1], ","), "cpu") {
			return f[2] == "/"+strings.TrimPrefix(rel, "/")
		}
	}
	return false
}

// settlePasses bounds Settle's reads of a job's tree.
const settlePasses = 20

// Thaw resumes every process of the job's tree.
func (h *Host) Thaw(pid int, keep []int) { Thaw(procfs.Tree(pid), keep) }

// StoppedCopies filters Copies: frozen ones whose job directory is spool
// (on an emulated cluster every node's processes share one PID namespace,
// and another node's copy is not this node's to touch).
func (h *Host) StoppedCopies(id, spool string) []int {
	var out []int
	for pid, at := range Inits() {
		if spool == "" || at != spool || !strings.HasSuffix(at, "/spool/"+id) {
			continue
		}
		if st, err := procfs.ReadStat(pid); err == nil && st.State == 'T' {
			out = append(out, pid)
		}
	}
	return out
}

// networkFS are the filesystem types that are the same filesystem on every
// host that mounts them.
var networkFS = map[string]bool{"nfs": true, "nfs4": true, "cifs": true, "smb3": true, "ceph": true,
	"fuse.glusterfs": true, "glusterfs": true, "lustre": true, "gpfs": true, "beegfs": true,
	"fuse.cephfs": true, "ocfs2": true, "gfs2": true, "9p": true, "virtiofs": true}

// NetworkMounts lists the mount points of network and cluster filesystems
// in a mountinfo table (/proc/self/mountinfo): the default shared
// directories.
func NetworkMounts(mountinfo string) []string {
	var out []string
	for _, m := range parseMountinfo(mountinfo) {
		if networkFS[m.fstype] {
			out = append(out, m.point)
		}
	}
	return out
}
