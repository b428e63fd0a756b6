// Package ckpt checkpoints and restores a roam job with CRIU, through
// CRIU's RPC interface (criu swrk), with go-criu's messages.
//
// A job is roam-init and its descendants, in their own PID and mount
// namespaces. roam-init leaves the job a minimal mount tree (the root, the
// mounts that hold files, its own /proc, its own /tmp and /var/tmp, and
// the spool directory bound at JobDir), and every mount but the root,
// /proc, /tmp and /var/tmp (see jobtmp.go) is declared to CRIU as
// external. On restore each is bound from the same path on the new node,
// except JobDir, which is bound from the new node's spool directory, so the
// job's stdout, stderr and status reopen there. Every regular file of the
// job outside JobDir is declared external too, by CRIU's key for it, and
// the restore is handed descriptors for them instead of paths (files.go).
package ckpt

import (
	"bufio"
	"errors"
	"fmt"
	"math"
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

	criu "github.com/checkpoint-restore/go-criu/v7"
	"github.com/checkpoint-restore/go-criu/v7/rpc"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/proto"

	"roam/internal/procfs"
)

// JobDir is where roam-init binds the job's spool directory inside the
// job's mount namespace (cinit/roam-init.c uses the same path).
const JobDir = "/run/roam/job"

// roamCRIU is where scripts/deps.sh installs the CRIU roam is tested with.
const roamCRIU = "/opt/roam/sbin/criu"

// DefaultPath is roam's own CRIU when installed, else criu from PATH.
func DefaultPath() string {
	if _, err := os.Stat(roamCRIU); err == nil {
		return roamCRIU
	}
	if p, err := exec.LookPath("criu"); err == nil {
		return p
	}
	return "criu"
}

// CRIU runs CRIU.
type CRIU struct {
	Path string
	// ExecMu must be held by everyone in the process who starts a child
	// (execlock.Start): a restore hands CRIU descriptors by leaving them
	// inheritable while CRIU starts, and no other child may inherit them.
	ExecMu *sync.Mutex
	// Timeout bounds a dump and a restore: a CRIU that has not answered
	// by then is killed (a hung CRIU would keep the job frozen and the
	// node's scheduler waiting). Zero means DefaultTimeout.
	Timeout time.Duration
	// Yard, if set, is a cgroup yard EnsureYard made: CRIU opens the
	// host's cgroup hierarchies there instead of mounting each again
	// (see yard.go).
	Yard string
}

// DefaultTimeout is CRIU's time limit when none is set: far more than a
// dump of many GiB takes, far less than forever.
const DefaultTimeout = 10 * time.Minute

// Mounts lists the mount points of a job's mount namespace that CRIU must
// treat as external: all but the root, /proc and the job's own /tmp and
// /var/tmp (see JobTmpSource).
func Mounts(pid int) ([]string, error) {
	mi, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/mountinfo")
	if err != nil {
		return nil, err
	}
	return externalMounts(string(mi)), nil
}

// externalMounts is Mounts of a mountinfo table.
func externalMounts(mountinfo string) []string {
	var out []string
	for _, m := range parseMountinfo(mountinfo) {
		if m.point != "/" && m.fstype != "proc" && !isJobTmp(m) {
			out = append(out, m.point)
		}
	}
	return out
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// mountKey names an external mount point in the images: hex, so that no
// path can confuse CRIU's "mnt[KEY]:VALUE" syntax.
func mountKey(mp string) string { return fmt.Sprintf("m%x", mp) }

// DumpOpts says what to dump and how.
type DumpOpts struct {
	PID    int      // roam-init's pid on this host
	Dir    string   // images directory, existing and empty
	Mounts []string // from Mounts
	// Lazy leaves the memory pages out of the images: CRIU then serves
	// them on PageConn, and Dump returns once the lazy-pages daemon on
	// the other side has taken them all.
	Lazy bool
	// PageConn is a connected Unix socket: without Lazy, to a CRIU page
	// server, and the pages go there as they are dumped instead of to
	// Dir; with Lazy, to a lazy-pages daemon, which fetches them from it.
	// Never a listening port: any local process could connect to one and
	// read the job's memory. (On TCP, besides, CRIU's corked last write
	// waits out the kernel's 200 ms cork timer.)
	PageConn *os.File
	// Ready, with Lazy, is called once the images (all but the pages) are
	// written, while the page server serves.
	Ready func()
	// Started, if set, is called once CRIU's worker runs, before it
	// touches the job, with the worker's pid.
	Started func(worker int)
	// GhostLimit is the largest deleted file (allocated bytes) CRIU puts
	// in the images, of those it does not take as external (the job's
	// own directory's); 0 is CRIU's default, 1 MiB.
	GhostLimit int64
	// External, if set, is asked once CRIU holds every task of the tree
	// and before it dumps any file (CRIU's query-ext-files notification)
	// which resources CRIU is to take as external ("file[MNT:INO]"): the
	// images then name each by that key alone, for the restore to be
	// handed (RestoreOpts.Inherit). Its error fails the dump.
	External func() ([]string, error)
}

// Dump checkpoints the job and leaves it stopped (SIGSTOP): the caller
// either kills it, once the copy runs elsewhere, or resumes it with Thaw.
// It returns where the time went, also when it failed.
func (c *CRIU) Dump(o DumpOpts) (Times, error) {
	t0 := time.Now()
	var started time.Duration
	err := c.dump(o, t0, &started)
	return dumpTimes(o.Dir, started, time.Since(t0)), err
}

func (c *CRIU) dump(o DumpOpts, t0 time.Time, started *time.Duration) error {
	d, err := os.Open(o.Dir)
	if err != nil {
		return err
	}
	defer d.Close()
	opts := &rpc.CriuOpts{
		Pid:          proto.Int32(int32(o.PID)),
		ImagesDirFd:  proto.Int32(int32(d.Fd())),
		LogFile:      proto.String("dump.log"),
		LogLevel:     proto.Int32(4),
		LeaveStopped: proto.Bool(true),
		// File locks move with the job; the pin rules refuse those the
		// destination could not take again (migrate.Judge).
		FileLocks: proto.Bool(true),
	}
	if c.Yard != "" {
		opts.CgroupYard = proto.String(c.Yard)
	}
	if o.GhostLimit > 0 {
		opts.GhostLimit = proto.Uint32(uint32(min(o.GhostLimit, math.MaxUint32)))
	}
	for _, m := range o.Mounts {
		opts.External = append(opts.External, "mnt["+m+"]:"+mountKey(m))
	}
	var files []*os.File
	if o.PageConn != nil {
		files = append(files, o.PageConn)
	} else if o.Lazy {
		return errors.New("criu dump: a lazy dump needs a page socket")
	}
	w, fds, err := c.startWorker(files, nil)
	*started = time.Since(t0)
	if err != nil {
		return err
	}
	pid := w.cmd.Process.Pid
	if o.Started != nil {
		o.Started(pid)
	}
	defer w.end()
	// A lazy dump's time limit ends with its images: serving the pages
	// is the lazy dump's idle guard's to bound (see the agent's lazyIdle).
	stop := c.watch(killWorker(pid))
	var stopped atomic.Bool // the limit fired before a lazy dump was ready
	if o.Lazy {
		// CRIU's RPC takes no page socket for a lazy dump (it would listen
		// on every address); its --ps-socket option, given in a config
		// file CRIU reads after the request, hands it the socket instead.
		conf, err := psSocketConfig(fds[0])
		if err != nil {
			return err
		}
		defer conf.Close()
		opts.ConfigFile = proto.String(fmt.Sprintf("/proc/%d/fd/%d", os.Getpid(), conf.Fd()))
		opts.LazyPages = proto.Bool(true)
	} else if len(fds) > 0 {
		opts.Ps = &rpc.CriuPageServerInfo{Fd: proto.Int32(fds[0])}
	}
	var declared error // External's
	_, err = w.call(&rpc.CriuReq{Type: rpc.CriuReqType_DUMP.Enum(), Opts: opts}, func(n *rpc.CriuNotify) (*rpc.CriuOpts, error) {
		switch n.GetScript() {
		case "query-ext-files":
			if o.External == nil {
				return nil, nil
			}
			keys, err := o.External()
			if err != nil {
				declared = err
				return nil, err
			}
			// (images_dir_fd is a required field of the message, unused
			// in an answer.)
			return &rpc.CriuOpts{ImagesDirFd: proto.Int32(-1), External: keys}, nil
		case "post-dump":
			// A lazy dump has written its images: it serves pages next.
			if o.Lazy {
				stopped.Store(stop())
				if o.Ready != nil {
					o.Ready()
				}
			}
		}
		return nil, nil
	})
	if stop() || stopped.Load() {
		return fmt.Errorf("criu dump: no answer within %v; CRIU was killed", c.limit())
	}
	if declared != nil {
		return fmt.Errorf("criu dump: %w", declared)
	}
	if err != nil {
		return fmt.Errorf("criu dump: %s", logError(filepath.Join(o.Dir, "dump.log"), err))
	}
	return nil
}

// psSocketConfig is a CRIU config file, in memory, that names fd as the
// page server's socket.
func psSocketConfig(fd int32) (*os.File, error) {
	mfd, err := unix.MemfdCreate("criu-ps-socket.conf", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("criu config: %w", err)
	}
	f := os.NewFile(uintptr(mfd), "criu-ps-socket.conf")
	if _, err := fmt.Fprintf(f, "ps-socket %d\n", fd); err != nil {
		f.Close()
		return nil, fmt.Errorf("criu config: %w", err)
	}
	return f, nil
}

// RestoreOpts says what to restore and where.
type RestoreOpts struct {
	Dir string // images directory
	// Mounts maps each external mount point of the dump to the path on
	// this host to bind there.
	Mounts map[string]string
	// Inherit maps a resource of the dumped job ("pipe:[INODE]") to the
	// file that replaces it.
	Inherit map[string]*os.File
	// CgroupRoots maps a cgroup controller to the cgroup (a path below the
	// controller's root) the job goes into; controllers not named go to
	// CRIU's own cgroup.
	CgroupRoots map[string]string
	// Lazy restores with memory pages fetched on demand by a lazy-pages
	// daemon already running on this host for Dir.
	Lazy bool
	// Check, when set, judges the restored tree under the pid it gets
	// before any task of it runs (see worker); its error ends the restore
	// with the tasks killed, and Restore returns it.
	Check func(pid int) error
}

// limit is the time limit in force.
func (c *CRIU) limit() time.Duration {
	if c.Timeout <= 0 {
		return DefaultTimeout
	}
	return c.Timeout
}

// watch runs kill once the time limit has passed; stop says whether it
// did.
func (c *CRIU) watch(kill func()) (stop func() bool) {
	var fired atomic.Bool
	t := time.AfterFunc(c.limit(), func() {
		fired.Store(true)
		kill()
	})
	return func() bool {
		t.Stop()
		return fired.Load()
	}
}

// killWorker is a dump's kill: its worker, which holds the job under
// ptrace (the job goes on once it is gone).
func killWorker(pid int) func() {
	return func() {
		if pid > 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// killRestore kills a restore's worker and whatever it started. First the
// init of each PID namespace below it (CRIU makes the restored job's
// namespace), which takes every task of that namespace with it: restored
// tasks that took their own session, as the job's had, are in no group
// of CRIU's and outlived a kill of the worker's group, waiting for a
// CRIU that had gone. Then every process left below the worker, deepest
// first, and its group.
func killRestore(worker int) {
	mine, _ := os.Readlink("/proc/self/ns/pid")
	tree := procfs.Tree(worker)
	for _, p := range tree {
		ns, err := os.Readlink("/proc/" + strconv.Itoa(p) + "/ns/pid")
		if n, ok := procfs.NSPid(p); err == nil && ns != mine && ok && n == 1 {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	}
	for i := len(tree) - 1; i >= 0; i-- {
		_ = syscall.Kill(tree[i], syscall.SIGKILL)
	}
	_ = syscall.Kill(-worker, syscall.SIGKILL)
}

// Restore recreates the job, stopped (SIGSTOP): the caller resumes it with
// Thaw once the source has let go of its copy. It returns roam-init's pid,
// and where the time went.
func (c *CRIU) Restore(o RestoreOpts) (int, Times, error) {
	t0 := time.Now()
	var started time.Duration
	pid, err := c.restore(o, t0, &started)
	return pid, restoreTimes(o.Dir, started, time.Since(t0)), err
}

func (c *CRIU) restore(o RestoreOpts, t0 time.Time, started *time.Duration) (int, error) {
	d, err := os.Open(o.Dir)
	if err != nil {
		return 0, err
	}
	defer d.Close()
	opts := &rpc.CriuOpts{
		ImagesDirFd:       proto.Int32(int32(d.Fd())),
		LogFile:           proto.String("restore.log"),
		LogLevel:          proto.Int32(4),
		Root:              proto.String("/"),
		LeaveStopped:      proto.Bool(true),
		ManageCgroupsMode: rpc.CriuCgMode_SOFT.Enum(),
		NotifyScripts:     proto.Bool(true),
		FileLocks:         proto.Bool(true),
	}
	if o.Lazy {
		opts.LazyPages = proto.Bool(true)
	}
	if c.Yard != "" {
		opts.CgroupYard = proto.String(c.Yard)
	}
	for ctrl, path := range o.CgroupRoots {
		opts.CgRoot = append(opts.CgRoot, &rpc.CgroupRoot{Ctrl: proto.String(ctrl), Path: proto.String(path)})
	}
	var st *stage
	if inUserNS(o.Dir) {
		dir, err := os.MkdirTemp("", "roam-criu-stage-")
		if err != nil {
			return 0, fmt.Errorf("criu restore: %w", err)
		}
		defer os.Remove(dir)
		st = &stage{dir: dir}
		opts.Root = proto.String(st.root())
	}
	for mp, host := range o.Mounts {
		if st != nil {
			host = st.at(host)
		}
		opts.External = append(opts.External, "mnt["+mountKey(mp)+"]:"+host)
	}
	files := make([]*os.File, 0, len(o.Inherit))
	keys := make([]string, 0, len(o.Inherit))
	for key, f := range o.Inherit {
		keys, files = append(keys, key), append(files, f)
	}
	w, fds, err := c.startWorker(files, st)
	*started = time.Since(t0)
	if err != nil {
		return 0, err
	}
	stop := c.watch(func() { killRestore(w.cmd.Process.Pid) })
	for i, key := range keys {
		opts.InheritFd = append(opts.InheritFd, &rpc.InheritFd{Key: proto.String(key), Fd: proto.Int32(fds[i])})
	}
	pid, refused, err := w.restore(opts, o.Check)
	limited := stop()
	if limited || refused != nil || err != nil || pid <= 0 {
		// Nothing of a restore that failed runs on: CRIU's own clean-up
		// does not run when it is killed, nor when its tasks were.
		killRestore(w.cmd.Process.Pid)
	}
	w.end()
	if limited {
		return 0, fmt.Errorf("criu restore: no answer within %v; CRIU was killed", c.limit())
	}
	if refused != nil {
		return 0, refused
	}
	if err != nil {
		return 0, fmt.Errorf("criu restore: %s", logError(filepath.Join(o.Dir, "restore.log"), err))
	}
	if pid <= 0 {
		return 0, errors.New("criu restore: no pid reported")
	}
	return pid, nil
}

// worker is CRIU's RPC worker (criu swrk) and roam's end of its socket. A
// dump and a restore talk to it here rather than through go-criu's loop,
// which answers every notification without passing on what it brings or
// taking an answer: a dump declares the job's files external at
// query-ext-files (DumpOpts.External), and a restored tree is judged at
// pre-resume (RestoreOpts.Check), while CRIU still holds every task under
// ptrace with its credentials, descriptors and memory as it will run, and
// no signal can start it.
type worker struct {
	cmd *exec.Cmd
	sk  *os.File
}

// inheritable duplicates files as descriptors a child inherits: CRIU
// takes such files by their number in its own process. The caller holds
// ExecMu, so that no other child inherits them, and closes them once CRIU
// has started. It stops at the first that fails, with the ones made so
// far.
func inheritable(files []*os.File) ([]int32, error) {
	var dups []int32
	for _, f := range files {
		fd, err := syscall.Dup(int(f.Fd()))
		if err != nil {
			return dups, fmt.Errorf("duplicate a descriptor for CRIU: %w", err)
		}
		dups = append(dups, int32(fd))
	}
	return dups, nil
}

// inheritableFD clears descriptor fd's close-on-exec flag (the caller
// holds ExecMu).
func inheritableFD(fd int) error {
	if _, _, e := syscall.Syscall(syscall.SYS_FCNTL, uintptr(fd), syscall.F_SETFD, 0); e != 0 {
		return fmt.Errorf("let CRIU inherit its socket: %w", e)
	}
	return nil
}

// rpcBuffer is the send buffer of roam's end of CRIU's RPC socket: room
// for a request naming migrate.MaxOpenFiles files.
const rpcBuffer = 4 << 20

// startWorker starts CRIU's worker with files it inherits (see
// inheritable; returned by their numbers in the worker, in the order
// given), in a mount namespace of its own set up as st says when st is
// not nil.
func (c *CRIU) startWorker(files []*os.File, st *stage) (*worker, []int32, error) {
	// Both ends close on exec, and the worker's is made inheritable only
	// under ExecMu, just before the worker starts: a child another
	// goroutine started meanwhile (a job's, a page server, another
	// worker) held the worker's end for its life, and a worker killed
	// in a dump left roam's read of its answer waiting on it (the chaos
	// run's migration that never returned).
	fds, err := syscall.Socketpair(syscall.AF_LOCAL, syscall.SOCK_SEQPACKET|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("start criu: %w", err)
	}
	// A request is one message, which must fit in the socket's buffer
	// (208 KiB by default): a restore's inherited descriptors and a dump's
	// external files take some 25 bytes each, and a job may hold
	// thousands. (Root may set it past net.core.wmem_max.)
	_ = syscall.SetsockoptInt(fds[0], syscall.SOL_SOCKET, syscall.SO_SNDBUFFORCE, rpcBuffer)
	sk := os.NewFile(uintptr(fds[0]), "criu-rpc")
	srv := os.NewFile(uintptr(fds[1]), "criu-rpc-worker")
	c.ExecMu.Lock()
	dups, err := inheritable(files)
	if err == nil {
		err = inheritableFD(fds[1])
	}
	cmd := exec.Command(c.Path, "swrk", strconv.Itoa(fds[1]))
	// A group of its own: the worker restores in a child of its own
	// ("criu: restore --rpc"), which a kill of the worker alone leaves
	// holding the restored tasks.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err == nil && st != nil {
		err = st.start(cmd)
	} else if err == nil {
		err = cmd.Start()
	}
	for _, fd := range dups {
		syscall.Close(int(fd))
	}
	srv.Close() // before the next child may start: it would inherit it
	c.ExecMu.Unlock()
	if err != nil {
		sk.Close()
		return nil, nil, fmt.Errorf("start criu: %w", err)
	}
	return &worker{cmd: cmd, sk: sk}, dups, nil
}

// end closes the socket, which ends the worker, and waits for it.
func (w *worker) end() {
	w.sk.Close()
	_ = w.cmd.Wait()
}

// call sends req to the worker and answers each notification CRIU sends
// before its answer with what on returns: options CRIU takes then (the
// externals of query-ext-files), or an error, which tells CRIU the
// notification failed (CRIU then fails the request). An abandon error
// ends the call at once, unanswered. It returns CRIU's answer.
func (w *worker) call(req *rpc.CriuReq, on func(*rpc.CriuNotify) (*rpc.CriuOpts, error)) (*rpc.CriuResp, error) {
	opts := req.GetOpts()
	opts.NotifyScripts = proto.Bool(true)
	buf := make([]byte, 2*4096)
	for {
		b, err := proto.Marshal(req)
		if err != nil {
			return nil, err
		}
		if _, err := w.sk.Write(b); err != nil {
			return nil, err
		}
		n, err := w.sk.Read(buf)
		if err != nil {
			return nil, err
		}
		resp := &rpc.CriuResp{}
		if err := proto.Unmarshal(buf[:n], resp); err != nil {
			return nil, err
		}
		if !resp.GetSuccess() {
			return resp, fmt.Errorf("operation failed (msg:%s err:%d)", resp.GetCrErrmsg(), resp.GetCrErrno())
		}
		if resp.GetType() != rpc.CriuReqType_NOTIFY {
			return resp, nil
		}
		answer, err := on(resp.GetNotify())
		var ab abandon
		if errors.As(err, &ab) {
			return nil, ab
		}
		req = &rpc.CriuReq{Type: rpc.CriuReqType_NOTIFY.Enum(), NotifySuccess: proto.Bool(err == nil), Opts: answer}
	}
}

// abandon is a notification's error that ends a worker's call without an
// answer to CRIU.
type abandon struct{ err error }

func (a abandon) Error() string { return a.err.Error() }

// restore asks the worker to restore, answering its notifications: the
// tree's pid comes with post-restore; at pre-resume check judges it, and
// a tree it refuses is killed there, none of its tasks having run
// (refused is then check's error).
func (w *worker) restore(opts *rpc.CriuOpts, check func(pid int) error) (pid int, refused, err error) {
	req := &rpc.CriuReq{Type: rpc.CriuReqType_RESTORE.Enum(), Opts: opts}
	_, err = w.call(req, func(n *rpc.CriuNotify) (*rpc.CriuOpts, error) {
		switch n.GetScript() {
		case "post-restore":
			pid = int(n.GetPid())
		case "pre-resume":
			if check != nil && pid > 0 {
				if err := check(pid); err != nil {
					// Held under ptrace, each task dies at once. CRIU,
					// told to go on, would wait for them for good: it
					// goes too (Restore kills it, killRestore), and
					// with it their tracer.
					for _, p := range procfs.Tree(pid) {
						_ = syscall.Kill(p, syscall.SIGKILL)
					}
					refused = err
					return nil, abandon{err}
				}
			}
		}
		return nil, nil
	})
	if refused != nil {
		return 0, refused, nil
	}
	return pid, nil, err
}

// Version is CRIU's version as a number (40201 for 4.2.1).
func (c *CRIU) Version() (int, error) {
	cr := criu.MakeCriu()
	cr.SetCriuPath(c.Path)
	c.ExecMu.Lock()
	err := cr.Prepare()
	c.ExecMu.Unlock()
	if err != nil {
		return 0, err
	}
	defer cr.Cleanup()
	return cr.GetCriuVersion()
}

// Thaw resumes a stopped job: every process of its tree but those whose
// pid in the job's namespace is in keep (stopped before the job was
// frozen, they stay stopped).
func Thaw(tree []int, keep []int) {
	for _, p := range tree {
		if len(keep) > 0 {
			if n, ok := procfs.NSPid(p); ok && slices.Contains(keep, n) {
				continue
			}
		}
		_ = syscall.Kill(p, syscall.SIGCONT)
	}
}

// logError is the most telling line of a CRIU log: the first "Error" line
// that is not the harmless rlimit one, with the RPC error after it.
// LogError is the first error line of a CRIU log, or err's text when the
// log has none.
func LogError(path string, err error) string { return logError(path, err) }

func logError(path string, err error) string {
	f, ferr := os.Open(path)
	if ferr != nil {
		return err.Error()
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		l := sc.Text()
		i := strings.Index(l, "Error (")
		if i < 0 || strings.Contains(l, "RLIMIT_NOFILE") {
			continue
		}
		if j := strings.Index(l[i:], "): "); j >= 0 {
			return strings.TrimSpace(l[i+j+3:])
		}
		return strings.TrimSpace(l[i:])
	}
	return err.Error()
}

// Copies lists the roam-init processes on this host that run job id: those
// whose mount namespace has a spool directory .../spool/ID bound at JobDir.
// (Not their command line, which a process restored lazily cannot show
// until its pages have arrived.) Zombies are left out.
func Copies(id string) []int {
	var out []int
	for pid, spool := range Inits() {
		if !strings.HasSuffix(spool, "/spool/"+id) {
			continue
		}
		if st, err := procfs.ReadStat(pid); err == nil && st.State != 'Z' {
			out = append(out, pid)
		}
	}
	return out
}

// pidOne tells whether pid is PID 1 of its PID namespace: a job's
// roam-init, and not a child it forked that has not executed its program
// yet (the program's process, or the helper that writes a user
// namespace's maps), which has its name and mounts.
func pidOne(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(l, "NSpid:"); ok {
			f := strings.Fields(rest)
			return len(f) > 1 && f[len(f)-1] == "1"
		}
	}
	return false
}

// Inits lists the roam-init processes on this host (PID 1 of their
// namespaces), each with the spool directory bound at JobDir in its mount
// namespace, as this process's mounts show it (a state directory on a file system mounted below its
// own root, a tmpfs at /run/roam/clusters/NAME, binds a path that the
// file system names /n2/spool/ID), or "" when it has none yet (or is
// exiting).
func Inits() map[int]string {
	out := map[int]string{}
	self, _ := os.ReadFile("/proc/self/mountinfo")
	host := parseMountinfo(string(self))
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if b, err := os.ReadFile("/proc/" + e.Name() + "/comm"); err != nil || string(b) != "roam-init\n" || !pidOne(pid) {
			continue
		}
		out[pid] = ""
		mi, _ := os.ReadFile("/proc/" + e.Name() + "/mountinfo")
		for _, m := range parseMountinfo(string(mi)) {
			if m.point == JobDir {
				out[pid] = hostPath(host, m.dev, m.root)
			}
		}
	}
	return out
}
