package job

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"roam/internal/asuser"
	"roam/internal/cgroup"
	"roam/internal/execlock"
	"roam/internal/migrate"
	"roam/internal/procfs"
	"roam/internal/resources"
	"roam/internal/slurm"
)

// Spec is what a node needs to start a job.
type Spec struct {
	ID     string   `json:"id"`
	UID    uint32   `json:"uid"`
	GID    uint32   `json:"gid"`
	Groups []uint32 `json:"groups,omitempty"`
	Argv   []string `json:"argv"`
	Env    []string `json:"env"`
	Cwd    string   `json:"cwd"`
	Stdin  bool     `json:"stdin"`
	// Pin: roam run --pin; no policy moves it (the launcher ignores it).
	Pin bool `json:"pin,omitempty"`
	// CheckpointEvery: roam run --checkpoint-every (the launcher ignores
	// it).
	CheckpointEvery time.Duration `json:"checkpoint_every,omitempty"`
	// Req is roam run's --cpus and --mem: the job's cgroup limits.
	Req resources.Request `json:"req,omitzero"`
	// Slurm is the Slurm job whose extern step the job's process joins
	// on this node (Launcher.SlurmGroups); "": none. Within are the
	// nodes it may run on, the allocation's (the launcher ignores it).
	Slurm  string   `json:"slurm,omitempty"`
	Within []string `json:"within,omitempty"`
}

// Errors of a spec that cannot start; each message names the thing.
var (
	ErrNoProgram = errors.New("program not found")
	ErrNotExec   = errors.New("program not executable")
	ErrNoCwd     = errors.New("working directory missing")
)

// Launcher starts jobs on this node.
type Launcher struct {
	// Init is the path of roam-init.
	Init string
	// Cgroups, when set, gives every job a cgroup of its own (nil: jobs
	// stay in the agent's).
	Cgroups *cgroup.Jobs
	// ExecMu, when set, is held while the job's process starts (see
	// ckpt.CRIU.ExecMu).
	ExecMu *sync.Mutex
	// SpoolRoot holds one directory per job with its output and status.
	SpoolRoot string
	// UserNS starts every user's job (not root's) in a user namespace of
	// its own, owned by root and mapping every id to itself (roam-init
	// -U), so that root's CRIU can dump it without CAP_SYS_RESOURCE on
	// the host: set where the host allows user namespaces (UserNSAllowed).
	UserNS bool
	// Template, when set, is the node's template of a job's mount
	// namespace, which each job copies (nil: each job drops the mounts
	// it does not keep itself).
	Template *Template
	// SlurmGroups, when set, are the cgroup.procs files of Slurm job
	// job's extern step on this node, for a job of uid: a job that names
	// a Slurm job joins them after its own groups, so that Slurm counts,
	// limits and ends it (nil: the node runs no Slurm job's processes).
	SlurmGroups func(uid uint32, job string) ([]string, error)
	// TmpBytes is the size of each job's own /tmp and /var/tmp
	// (migrate.JobTmp), tmpfs mounts roam-init makes in the job's mount
	// namespace, hiding the node's (limits.job_tmp_bytes); 0 is
	// DefaultTmpBytes.
	TmpBytes int64
}

// DefaultTmpBytes is the size of a job's /tmp and /var/tmp when the
// config sets none (limits.job_tmp_bytes): 1 GiB, far more than a
// compiler's or a sort's temporary files, and a bound on a job that
// writes there without end. A tmpfs takes memory only for what is written
// to it, and a migration copies that while the job is frozen.
const DefaultTmpBytes = 1 << 30

// Proc is a started job.
type Proc struct {
	PID      int
	StartTix uint64
	Dir      string
	Stdin    *os.File // write end of the job's stdin, nil without stdin
	// Wait returns once the process has ended, and reaps it.
	Wait func() error
}

// Processes is what an agent needs of its node's processes: it starts
// jobs and tells, signals, kills and measures them. Launcher is the real
// one (roam-init, /proc and signals); the agent's in-process harness has
// a fake beside it. A process is named by its pid and its start time
// (tix), so a reused pid is never taken for the job.
type Processes interface {
	Start(Spec) (*Proc, error)
	// SpoolDir is job id's spool directory on this node.
	SpoolDir(id string) string
	Alive(pid int, tix uint64) bool
	StartTicks(pid int) uint64
	Signal(pid int, sig syscall.Signal) error
	// Kill kills the job's tree and waits, at most wait, until it is gone.
	Kill(pid int, tix uint64, wait time.Duration)
	// Owner is the uid the process runs as.
	Owner(pid int) (uid uint32, ok bool)
	// StdinKey names the job's stdin pipe ("pipe:[INODE]"), "" when it
	// reads no pipe.
	StdinKey(pid int) string
	// Usage is job id's CPU seconds and resident memory: its cgroup's
	// counts, or its process tree's (from roam-init at pid) without one.
	Usage(id string, pid int) (cpuSeconds, rssMB float64)
	// Tidy removes what ended jobs left (their cgroups), but for the jobs
	// keep keeps: those whose home has not yet had what they used and
	// how they ended (PeakMB, OOMKills).
	Tidy(keep func(id string) bool)
	// PeakMB is the most memory job id has held on this node, in MiB:
	// its cgroup's count, which outlives its processes (0 without one).
	PeakMB(id string) float64
	// OOMKills is how many processes of job id the kernel's OOM killer
	// killed here, inside its cgroup (0 without one).
	OOMKills(id string) int64
	// Activity is the tree's runnable threads, read and write system
	// calls so far, and resident memory.
	Activity(pid int) (runnable int, syscalls uint64, rssMB float64)
	// Stopped tells whether the job's program is stopped (SIGSTOP, ^Z):
	// every process of the tree under roam-init at pid.
	Stopped(pid int) bool
}

var _ Processes = Launcher{}

// SpoolDir is SpoolRoot/ID.
func (l Launcher) SpoolDir(id string) string { return filepath.Join(l.SpoolRoot, id) }

func (Launcher) Alive(pid int, tix uint64) bool { return Alive(pid, tix) }
func (Launcher) StartTicks(pid int) uint64      { return StartTicks(pid) }

// Signal sends sig to a job's roam-init, which forwards it to the
// program's process group. It is queued with SignalMark as its value: a
// SIGCONT without it (the one that thaws a frozen job, to every process
// of its tree) continues roam-init alone, and is not forwarded, so a
// process stopped before a migration stays stopped.
//
// SIGSTOP cannot be caught: sent to roam-init, PID 1 of the job's
// namespace, it would stop roam-init and not the program. It is asked for
// with a SIGTSTP of value StopMark instead, and roam-init, as the job's
// user and inside its namespace, stops the program's process group, as a
// terminal's ^Z would (or, once the program has ended, every process
// left). The agent signals no pid but roam-init's, its own child.
func (Launcher) Signal(pid int, sig syscall.Signal) error {
	value := uint64(SignalMark)
	if sig == syscall.SIGSTOP {
		sig, value = syscall.SIGTSTP, StopMark
	}
	info := siginfoQueue{signo: int32(sig), code: siQueue, pid: int32(os.Getpid()), value: value}
	_, _, e := syscall.Syscall(syscall.SYS_RT_SIGQUEUEINFO, uintptr(pid), uintptr(sig), uintptr(unsafe.Pointer(&info)))
	if e != 0 {
		return e
	}
	return nil
}

// Stopped is TreeStopped.
func (Launcher) Stopped(pid int) bool { return TreeStopped(pid) }

// TreeStopped tells whether every process under pid (its roam-init),
// zombies aside, is stopped, and there is one.
func TreeStopped(pid int) bool {
	tree := procfs.Tree(pid)
	stopped := false
	for _, p := range tree[min(1, len(tree)):] {
		st, err := procfs.ReadStat(p)
		switch {
		case err != nil || st.State == 'Z' || st.State == 'X':
		case st.State == 'T':
			stopped = true
		default:
			return false
		}
	}
	return stopped
}

// SignalMark is the value of the signals the agent sends (roam-init.c's
// ROAM_SIGNAL_MARK): "roam".
const SignalMark = 0x726f616d

// StopMark is the value of the SIGTSTP that asks roam-init to stop the
// program (roam-init.c's ROAM_STOP_MARK): "roST".
const StopMark = 0x726f5354

// siQueue is SI_QUEUE, the si_code of a signal sent with sigqueue(3).
const siQueue = -1

// siginfoQueue is the kernel's siginfo_t as sigqueue fills it on a 64-bit
// machine: 128 bytes.
type siginfoQueue struct {
	signo, errno, code, _ int32
	pid                   int32
	uid                   uint32
	value                 uint64
	_                     [96]byte
}

// Kill sends SIGKILL to roam-init, which ends the job's PID namespace,
// and to every other process of its tree: once it returns, none of them
// runs again, not even a stopped one its owner sends SIGCONT (the
// namespace's end would reach those only once roam-init has freed its
// memory). A killed process lives on until it has freed its memory: Kill
// waits up to wait until roam-init, the last of the namespace to go, is
// gone.
func (Launcher) Kill(pid int, tix uint64, wait time.Duration) {
	if Alive(pid, tix) {
		ns, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/pid")
		tree := procfs.Tree(pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		if ns != "" {
			for _, p := range tree {
				if p != pid {
					killInNS(p, ns)
				}
			}
		}
	}
	WaitGone(pid, tix, wait)
}

// killInNS sends SIGKILL to process p if it is in PID namespace ns: by a
// pidfd taken first, so that a pid reused since it was read is never hit.
func killInNS(p int, ns string) {
	fd, err := unix.PidfdOpen(p, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if got, err := os.Readlink("/proc/" + strconv.Itoa(p) + "/ns/pid"); err != nil || got != ns {
		return
	}
	_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
}

func (Launcher) Owner(pid int) (uint32, bool) {
	fi, err := os.Stat("/proc/" + strconv.Itoa(pid))
	if err != nil {
		return 0, false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}

func (Launcher) StdinKey(pid int) string {
	l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/fd/0")
	if err != nil || !strings.HasPrefix(l, "pipe:[") {
		return ""
	}
	return l
}

func (l Launcher) Usage(id string, pid int) (float64, float64) {
	if l.Cgroups != nil && !inSlurmJob(pid) {
		if cpu, rss, ok := l.Cgroups.Usage(id); ok {
			return cpu, rss
		}
	}
	return TreeUsage(pid)
}

// inSlurmJob says whether process pid is in a Slurm job's groups (a job
// that serves an allocation: Spec.Slurm): Slurm's cpuacct and memory
// groups count it then, and roam's own count nothing of it.
func inSlurmJob(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	if err != nil {
		return false
	}
	_, _, ok := slurm.JobOfCgroup(string(b))
	return ok
}

func (l Launcher) Tidy(keep func(id string) bool) {
	if l.Cgroups != nil {
		l.Cgroups.Tidy(keep)
	}
}

func (l Launcher) PeakMB(id string) float64 {
	if l.Cgroups != nil {
		return l.Cgroups.PeakMB(id)
	}
	return 0
}

// OOMKills is job.Processes.OOMKills.
func (l Launcher) OOMKills(id string) int64 {
	if l.Cgroups == nil {
		return 0
	}
	return l.Cgroups.OOMKills(id)
}

func (Launcher) Activity(pid int) (int, uint64, float64) { return TreeActivity(pid) }

// programPaths are the paths execvp would try for the job's program, in
// order: with the job's PATH, relative to its working directory.
func programPaths(s Spec) []string {
	prog := s.Argv[0]
	if strings.Contains(prog, "/") {
		if !filepath.IsAbs(prog) {
			prog = filepath.Join(s.Cwd, prog)
		}
		return []string{prog}
	}
	path := "/usr/local/bin:/usr/bin:/bin"
	for _, e := range s.Env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			path = v
		}
	}
	var out []string
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			dir = "."
		}
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(s.Cwd, dir)
		}
		out = append(out, filepath.Join(dir, prog))
	}
	return out
}

// slurmGroups are the extern step's cgroup.procs files of spec s's Slurm
// job here.
func (l Launcher) slurmGroups(s Spec) ([]string, error) {
	if err := slurm.ValidJobID(s.Slurm); err != nil {
		return nil, err
	}
	if l.SlurmGroups == nil {
		return nil, fmt.Errorf("%w: %s: this node serves no Slurm jobs (slurm.enabled)", slurm.ErrRefused, slurm.Field)
	}
	return l.SlurmGroups(s.UID, s.Slurm)
}

// Check tells, before anything is created, whether the job can start here:
// its working directory exists and its program exists and is executable by
// its user. Both are looked up as the user (asuser.Stat): root's lookup
// would tell a user whether a path exists in a directory the user may not
// search (a /root/... working directory, say).
func Check(s Spec) error {
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return fmt.Errorf("%w: no program given", ErrNoProgram)
	}
	progs := programPaths(s)
	fis, errs, err := asuser.Stat(asuser.Cred{UID: s.UID, GID: s.GID, Groups: s.Groups}, append([]string{s.Cwd}, progs...))
	if err != nil {
		return fmt.Errorf("look up the job's files as uid %d: %w", s.UID, err)
	}
	if errs[0] != nil || !fis[0].IsDir() {
		return fmt.Errorf("%w: %s", ErrNoCwd, s.Cwd)
	}
	if d := inJobTmp(s.Cwd); d != "" {
		return fmt.Errorf("working directory %s: a job's %s is its own and starts empty; run from a directory every node has", s.Cwd, d)
	}
	if d := inJobTmp(progs[0]); d != "" && len(progs) == 1 {
		return fmt.Errorf("program %s: a job's %s is its own and starts empty; put the program where every node has it", s.Argv[0], d)
	}
	for i := range progs {
		fi := fis[i+1]
		if errs[i+1] != nil || (!fi.Mode().IsRegular() && len(progs) > 1) {
			continue // execvp tries the next
		}
		if !fi.Mode().IsRegular() || !executableBy(fi, s.UID, s.GID, s.Groups) {
			return fmt.Errorf("%w: %s", ErrNotExec, s.Argv[0])
		}
		return nil
	}
	return fmt.Errorf("%w: %s", ErrNoProgram, s.Argv[0])
}

// inJobTmp is the scratch directory of the job's own (migrate.JobTmp) that
// path p lies in, "" when none: roam-init mounts an empty tmpfs on each
// that is a directory here, so the node's files there are not the job's.
func inJobTmp(p string) string {
	p = filepath.Clean(p)
	for _, d := range migrate.JobTmp {
		if !migrate.Under(p, d) {
			continue
		}
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			return d
		}
	}
	return ""
}

func executableBy(fi os.FileInfo, uid, gid uint32, groups []uint32) bool {
	m := fi.Mode().Perm()
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return m&0o111 != 0
	}
	if uid == 0 {
		return m&0o111 != 0
	}
	if st.Uid == uid {
		return m&0o100 != 0
	}
	inGroup := st.Gid == gid
	for _, g := range groups {
		inGroup = inGroup || st.Gid == g
	}
	if inGroup {
		return m&0o010 != 0
	}
	return m&0o001 != 0
}

// Start launches the job: roam-init as PID 1 of new PID and mount
// namespaces, stdout and stderr appended to spool files, stdin a pipe (empty
// and closed when the job takes no stdin), fd 3 the status file.
func (l Launcher) Start(s Spec) (*Proc, error) {
	if err := Check(s); err != nil {
		return nil, err
	}
	cg := "-"
	if l.Cgroups != nil {
		procs, release, err := l.Cgroups.Enter(s.ID, l.Cgroups.LimitsFor(s.Req))
		if err != nil {
			return nil, err
		}
		// roam-init has joined the group once it says it is ready (the
		// CPU group, the first, just after: see roam-init).
		defer release()
		if !l.Cgroups.Layout.V2 {
			procs[0] = "+" + procs[0]
		}
		cg = strings.Join(procs, ":")
	}
	if s.Slurm != "" {
		ext, err := l.slurmGroups(s)
		if err != nil {
			return nil, err
		}
		cg = strings.Join(append(slices.DeleteFunc([]string{cg}, func(x string) bool { return x == "-" }), ext...), ":")
	}
	dir := filepath.Join(l.SpoolRoot, s.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	open := func(name string, flag int) (*os.File, error) {
		f, err := os.OpenFile(filepath.Join(dir, name), flag, 0o600)
		if err == nil {
			files = append(files, f)
		}
		return f, err
	}
	out, err1 := open("stdout", os.O_CREATE|os.O_WRONLY|os.O_APPEND)
	errf, err2 := open("stderr", os.O_CREATE|os.O_WRONLY|os.O_APPEND)
	status, err3 := open("status", os.O_CREATE|os.O_WRONLY|os.O_APPEND)
	if err3 == nil {
		err3 = ReserveStatus(status)
	}
	if err := errors.Join(err1, err2, err3); err != nil {
		closeAll()
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		closeAll()
		return nil, err
	}
	files = append(files, inR)
	readyR, readyW, err := os.Pipe()
	if err != nil {
		closeAll()
		inW.Close()
		return nil, err
	}
	defer readyR.Close()
	files = append(files, readyW)
	env, err := envFile(s.Env)
	if err != nil {
		closeAll()
		inW.Close()
		return nil, err
	}
	files = append(files, env)
	if !s.Stdin {
		inW.Close()
		inW = nil
	}
	groups := "-"
	if len(s.Groups) > 0 {
		gs := make([]string, len(s.Groups))
		for i, g := range s.Groups {
			gs[i] = strconv.FormatUint(uint64(g), 10)
		}
		groups = strings.Join(gs, ",")
	}
	tmp := l.TmpBytes
	if tmp <= 0 {
		tmp = DefaultTmpBytes
	}
	rest := append([]string{strconv.FormatUint(uint64(s.UID), 10), strconv.FormatUint(uint64(s.GID), 10),
		groups, s.Cwd, cg, dir, strconv.FormatInt(tmp, 10), "--"}, s.Argv...)
	// roam-init itself runs with no environment (see envFile).
	cmd := &exec.Cmd{Path: l.Init, Env: []string{}, Stdin: inR, Stdout: out, Stderr: errf, ExtraFiles: []*os.File{status, readyW, env}}
	start := func(ns *os.File) error {
		cmd.Args = []string{l.Init}
		// roam-init makes the job's IPC namespace itself with -U,
		// together with its user namespace, which must own it; and its
		// mount namespace with -M, a copy of the template's.
		flags := uintptr(syscall.CLONE_NEWPID | syscall.CLONE_NEWNS | syscall.CLONE_NEWIPC)
		if l.UserNS && s.UID != 0 {
			cmd.Args = append(cmd.Args, "-U")
			flags &^= syscall.CLONE_NEWIPC
		}
		if ns != nil {
			cmd.Args = append(cmd.Args, "-M")
			cmd.ExtraFiles = append(cmd.ExtraFiles, ns)
			flags &^= syscall.CLONE_NEWNS
		}
		cmd.Args = append(cmd.Args, rest...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags, Setsid: true}
		return execlock.Start(cmd, l.ExecMu)
	}
	if l.Template != nil {
		err = l.Template.use(l.Init, l.ExecMu, start)
	} else {
		err = start(nil)
	}
	closeAll()
	if err != nil {
		if inW != nil {
			inW.Close()
		}
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", s.Argv[0], err)
	}
	waitReady(readyR)
	return &Proc{PID: cmd.Process.Pid, StartTix: StartTicks(cmd.Process.Pid), Dir: dir, Stdin: inW, Wait: cmd.Wait}, nil
}

// envFile is the job's environment for roam-init's fd 5: a memory file of
// NUL-terminated strings, read at its start. roam-init runs as root with
// no environment of its own, so that its C library's start-up reads
// nothing of the user's (glibc parses GLIBC_TUNABLES there, for one), and
// only the program's process, right before its exec, takes this one.
func envFile(env []string) (*os.File, error) {
	for _, e := range env {
		if strings.IndexByte(e, 0) >= 0 {
			return nil, fmt.Errorf("job environment: a NUL byte in %.40q", e)
		}
	}
	fd, err := unix.MemfdCreate("roam-env", unix.MFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("job environment: %w", err)
	}
	f := os.NewFile(uintptr(fd), "roam-env")
	var b []byte
	for _, e := range env {
		b = append(append(b, e...), 0)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return nil, fmt.Errorf("job environment: %w", err)
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		f.Close()
		return nil, fmt.Errorf("job environment: %w", err)
	}
	return f, nil
}

// waitReady waits until roam-init has closed its end of the ready pipe
// (fd 4): from then on it holds every signal for the program, so a signal
// sent as soon as the job is reported started is not lost, and the job's
// spool is bound at ckpt.JobDir, so a migration can find and move it. roam-init also
// closes it by exiting, when it fails early; the bound only guards against
// a machine so slow that the start would hang.
func waitReady(r *os.File) {
	_ = r.SetReadDeadline(time.Now().Add(readyTimeout))
	var b [1]byte
	for {
		if _, err := r.Read(b[:]); err != nil {
			return
		}
	}
}

const readyTimeout = 30 * time.Second

// WaitGone waits, at most d, until the process pid started at tix is gone
// (a zombie counts as gone).
func WaitGone(pid int, tix uint64, d time.Duration) {
	end := time.Now().Add(d)
	for Alive(pid, tix) && time.Now().Before(end) {
		time.Sleep(5 * time.Millisecond)
	}
}

// StartTicks is a process's start time in clock ticks since boot, which
// tells a live process from a reused pid; 0 when the process is gone or a
// zombie.
func StartTicks(pid int) uint64 {
	st, err := procfs.ReadStat(pid)
	if err != nil || st.State == 'Z' {
		return 0
	}
	return st.StartTime
}

// Alive reports whether the process started at tix is still running.
func Alive(pid int, tix uint64) bool {
	return pid > 0 && tix != 0 && StartTicks(pid) == tix
}

// ReadStatus returns the exit code roam-init wrote, if it has.
func ReadStatus(dir string) (int, bool) {
	// TrimSpace takes ReserveStatus's blanks off.
	b, err := os.ReadFile(filepath.Join(dir, "status"))
	if err != nil {
		return 0, false
	}
	code, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return code, err == nil
}

// ReserveStatus writes blanks into a job's new status file: the room on
// the disk for the exit status roam-init appends when the program ends.
// A state disk that fills while the job runs would refuse that write
// (ENOSPC for a file's first block), and the agent would take a job that
// exited 0 for killed before it could write (128+SIGKILL): the chaos run
// saw it. Blanks alone read as no status.
func ReserveStatus(f *os.File) error {
	_, err := f.WriteString("               \n")
	return err
}

// ReadSpool returns up to max bytes of a spool stream ("stdout" or
// "stderr") from offset off.
func ReadSpool(dir, stream string, off int64, max int) ([]byte, error) {
	path := filepath.Join(dir, stream)
	// Most reads (the push loop's, every few hundred milliseconds) find
	// nothing new: a stat, not an open.
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if fi.Size() <= off {
		return nil, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf := make([]byte, min(int64(max), fi.Size()-off))
	n, err := f.ReadAt(buf, off)
	if err != nil && err != io.EOF {
		return nil, err
	}
	return buf[:n], nil
}

// TreeUsage sums the CPU seconds and resident memory of a process and all
// its descendants (a job's whole namespace, from its roam-init).
func TreeUsage(pid int) (cpuSeconds, rssMB float64) {
	for _, p := range procfs.Tree(pid) {
		if st, err := procfs.ReadStat(p); err == nil {
			// Its own time, and that of the children it waited for.
			cpuSeconds += float64(st.UTime+st.STime+st.CUTime+st.CSTime) / procfs.UserHZ
		}
		rssMB += rss(p)
	}
	return cpuSeconds, rssMB
}

// rss is a process's resident memory in MiB, from /proc/PID/statm.
func rss(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[1], 64)
	return v * float64(os.Getpagesize()) / (1 << 20)
}

// TreeActivity is what scheduling needs of a job's processes, pid being
// its roam-init: how many threads are runnable now (roam-init's own left
// out, as the node's load leaves it out: it only waits, but one just
// restored is runnable until it gets a CPU), how many read and write
// system calls they have made (from /proc/PID/io; a rate needs two
// readings), and their resident memory.
func TreeActivity(pid int) (runnable int, syscalls uint64, rssMB float64) {
	for _, p := range procfs.Tree(pid) {
		rssMB += rss(p)
		dir := "/proc/" + strconv.Itoa(p)
		if p != pid {
			runnable += runnableThreads(dir)
		}
		if b, err := os.ReadFile(dir + "/io"); err == nil {
			for _, l := range strings.Split(string(b), "\n") {
				k, v, ok := strings.Cut(l, ": ")
				if ok && (k == "syscr" || k == "syscw") {
					n, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
					syscalls += n
				}
			}
		}
	}
	return runnable, syscalls, rssMB
}

// runnableThreads counts the threads of the process at dir (/proc/PID)
// that are runnable now.
func runnableThreads(dir string) int {
	tids, err := os.ReadDir(dir + "/task")
	if err != nil {
		return 0
	}
	n := 0
	for _, t := range tids {
		tid, _ := strconv.Atoi(t.Name())
		if st, err := procfs.ReadStat(tid); err == nil && st.State == 'R' {
			n++
		}
	}
	return n
}

// UserNSAllowed says whether this host lets root make a user namespace, as
// roam-init -U does for a user's job: nil, or why not
// (user.max_user_namespaces at 0 gives ENOSPC; a seccomp filter, a unit's
// RestrictNamespaces or an LSM, EPERM). It starts init, roam-init, in one,
// which exits at once with its usage line.
func UserNSAllowed(init string, execMu *sync.Mutex) error {
	cmd := exec.Command(init)
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWUSER}
	if err := execlock.Start(cmd, execMu); err != nil {
		return fmt.Errorf("no user namespaces here: %w", err)
	}
	_ = cmd.Wait()
	return nil
}
