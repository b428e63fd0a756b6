package migrate

import (
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"path"
	"strconv"
	"strings"

	"roam/internal/errkind"
	"roam/internal/proctext"
)

// What pins a job to its node. The driver reads what /proc says of the
// job's processes (View); Judge, here, applies the rules. Each rule looks
// at one kind of kernel object and names it in its reason.

// Entry is a link in /proc (fd/N, cwd, map_files/RANGE) and what stat(2)
// says of its target.
type Entry struct {
	Link  string
	Mode  uint32 // st_mode; 0 when the stat failed (the task ended)
	Nlink uint64
	Size  int64
	Alloc int64 // bytes allocated on disk (st_blocks * 512)
	Ino   uint64
	UID   uint32
	FSID  [2]int32 // statfs's f_fsid of the target's filesystem
	// FSType is statfs's f_type of it (MQueueMagic: a POSIX message
	// queue).
	FSType int64 `json:",omitempty"`
	// StatErr: the link named a path and its stat failed. The file is
	// then neither judged nor checked, so the job is pinned (a FUSE
	// filesystem could fail the agent's stat and answer CRIU's).
	StatErr string `json:",omitempty"`
	// Info is /proc/PID/fdinfo/N of a descriptor: its flags, the locks
	// held through it, an inotify's watches.
	Info string
}

// MapEntry is a mapping of a file (FileMappings) and its map_files entry.
type MapEntry struct {
	Mapping
	Entry
}

// Task is what /proc says of one process of a job.
type Task struct {
	PID    int
	Status string // /proc/PID/status
	Cwd    Entry
	FDs    []Entry
	Maps   []MapEntry
}

// View is what the driver read of a job's process tree, root first.
type View struct {
	Tasks []Task
	// TCP are the established connections of the job's network namespace.
	TCP []TCPConn
	// OwnIPC: the job has an IPC namespace of its own (CRIU carries its
	// SysV objects with it, not its POSIX message queues).
	OwnIPC bool
	// Dirs are the directories of the deleted files the job holds, by
	// path, as stat(2) saw them (Mode 0: gone too). The destination makes
	// each deleted file again there, without a name, as the job's owner.
	Dirs map[string]Entry `json:",omitempty"`
	// MQueues are the POSIX message queues of the job's own IPC namespace
	// (with OwnIPC), by name; MQueueErr says why they could not be listed.
	MQueues   []string `json:",omitempty"`
	MQueueErr string   `json:",omitempty"`
}

// Pinned is the error of a job the rules pin: Reason says why, in the
// words `roam ps` shows. It matches ErrPinned.
type Pinned struct {
	Job, Reason string
}

func (p *Pinned) Error() string        { return p.Job + ": " + p.Reason }
func (p *Pinned) Is(target error) bool { return target == ErrPinned }

// PinReason is why err pins its job: a Pinned's reason, or the message of
// another ErrPinned (a destination's, which came as an answer); false when
// err does not pin.
func PinReason(err error) (string, bool) {
	var p *Pinned
	switch {
	case errors.As(err, &p):
		return p.Reason, true
	case errors.Is(err, ErrPinned):
		return err.Error(), true
	}
	return "", false
}

// MQueueMagic is the f_type of the kernel's mqueue filesystem.
const MQueueMagic = 0x19800202

// ProcMagic is the f_type of a proc filesystem: a job's own /proc, which
// roam-init mounts in its namespaces.
const ProcMagic = 0x9fa0

// TmpfsMagic is the f_type of a tmpfs.
const TmpfsMagic = 0x01021994

// JobTmp are the job's own scratch directories (cinit/roam-init.c's
// job_tmp_dirs): roam-init mounts a tmpfs of the job's own on each, which CRIU carries in the
// images, content and all. What the job keeps there moves with it: it is
// neither pinned nor listed for the destination to check, whose /tmp is
// another node's.
var JobTmp = []string{"/tmp", "/var/tmp"}

// inJobTmp says whether the file at p, of entry e, is in the job's own
// /tmp or /var/tmp: below one of them and on a tmpfs, and in neither the
// job's directory nor a shared one, whose rules come first. (A file of a
// disk's there is the node's /tmp, which a job started by a roam-init
// that made none of its own still sees.)
func (j *judge) inJobTmp(p string, e Entry) bool {
	return !under(p, j.r.JobDir) && !Shared(p, j.r.Shared) && InJobTmp(p, e.FSType)
}

// InJobTmp says whether path p, on a filesystem of f_type fstype, is in
// the job's own /tmp or /var/tmp: below one of them, and on a tmpfs.
func InJobTmp(p string, fstype int64) bool {
	if fstype != TmpfsMagic {
		return false
	}
	for _, d := range JobTmp {
		if under(p, d) {
			return true
		}
	}
	return false
}

// TCPConn is an established TCP connection in the job's network namespace:
// its socket inode and remote address.
type TCPConn struct {
	Inode  string
	Remote string
}

// Rules are a node's settings that the rules depend on.
type Rules struct {
	JobDir  string          // the job's own directory: it moves with the job
	Shared  []string        // directories every node has at the same path
	Members map[string]bool // the cluster's addresses
	// GhostLimit is the largest deleted file that moves with the job
	// (CRIU's ghost file limit); 0 moves none.
	GhostLimit int64
	// Frozen: the job is frozen by a dump, whose CRIU may still trace it
	// (a lazy dump serves its pages so): the tracer rule does not apply.
	Frozen bool
}

// Verdict is what the rules say of a job.
type Verdict struct {
	// Files are the files the destination must reach (see OpenFile).
	Files []OpenFile
	// Pin says why the job cannot move, or "".
	Pin string
	// Stopped are the tasks stopped (SIGSTOP, ^Z) as the job ran, by their
	// pid in the job's namespace: they stay stopped after a migration.
	Stopped []int
	// Ghosts are the deleted files that move in the images, in bytes.
	Ghosts int64
}

// The kinds of file a mode names.
const (
	modeType = 0o170000
	modeReg  = 0o100000
	modeDir  = 0o040000
	modeChr  = 0o020000
	modeBlk  = 0o060000
	modeFIFO = 0o010000
	modeSock = 0o140000
)

// harmlessDevice are devices every node has and that hold no state.
var harmlessDevice = map[string]bool{"/dev/null": true, "/dev/zero": true, "/dev/random": true, "/dev/urandom": true, "/dev/full": true}

// dumpableAnon are the anonymous-inode descriptors CRIU dumps and restores.
var dumpableAnon = map[string]bool{"[eventfd]": true, "[signalfd]": true, "[timerfd]": true, "[eventpoll]": true, "inotify": true, "[fanotify]": true}

// quoteOdd quotes a name a user chose when it holds anything but plain
// printable characters (a reason is one line, and goes to terminals).
func quoteOdd(s string) string { return errkind.QuoteOdd(s, 0) }

// ghostDirWhy ends the reasons of a removed directory.
const ghostDirWhy = ": CRIU would make it again on the destination as root, with any parents missing there, before the job's files are checked"

// mqueueWhy ends the reasons of a POSIX message queue.
const mqueueWhy = ": CRIU does not carry message queues, so its messages would be lost"

// Judge applies the rules to a job: the first that pins it, or the files
// the destination must reach and what else moves with it.
func Judge(v View, r Rules) Verdict {
	var out Verdict
	j := judge{r: r, seen: map[string]int{}, dirs: v.Dirs}
	sockets := map[string]bool{}
	switch {
	case !v.OwnIPC:
	case v.MQueueErr != "":
		return Verdict{Pin: "its IPC namespace's POSIX message queues cannot be listed: " + v.MQueueErr}
	case len(v.MQueues) > 0:
		return Verdict{Pin: "its IPC namespace holds the POSIX message queue " + quoteOdd(v.MQueues[0]) + mqueueWhy}
	}
	for _, t := range v.Tasks {
		if pin := j.task(t, &out, sockets, v.OwnIPC); pin != "" {
			return Verdict{Pin: pin}
		}
	}
	for _, c := range v.TCP {
		if !sockets[c.Inode] {
			continue
		}
		where := "outside the cluster"
		if ap, err := netip.ParseAddrPort(c.Remote); err == nil && r.Members[ap.Addr().String()] {
			where = "inside the cluster; its address would change"
		}
		return Verdict{Pin: "holds a TCP connection to " + c.Remote + " (" + where + ")"}
	}
	out.Files = j.files
	return out
}

type judge struct {
	r     Rules
	files []OpenFile
	seen  map[string]int // path -> index in files
	dirs  map[string]Entry
	// ghosts are the deleted files counted, by filesystem and inode.
	ghosts map[[3]uint64]bool
}

// task applies the rules to one process.
func (j *judge) task(t Task, out *Verdict, sockets map[string]bool, ownIPC bool) string {
	who := "process " + strconv.Itoa(t.PID)
	st := statusFields(t.Status)
	if tp := st["TracerPid"]; tp != "" && tp != "0" && !j.r.Frozen {
		return who + " is traced by process " + tp + " (ptrace): CRIU cannot seize a traced process"
	}
	if strings.HasPrefix(st["State"], "T") {
		if n, ok := proctext.ParseNSPid(t.Status); ok {
			out.Stopped = append(out.Stopped, n)
		}
	}
	switch c := t.Cwd; {
	case c.StatErr != "":
		return who + " works in " + c.Link + ", which cannot be examined: " + c.StatErr
	case c.Mode == 0:
	case c.Mode&modeType != modeDir:
		// The kernel's working directory is a directory: anything else
		// was read wrong, and is not moved on a guess.
		return who + " works in " + c.Link + ", which is not a directory"
	case c.Nlink == 0:
		return who + " works in the removed directory " + trimDeleted(c.Link) + ghostDirWhy
	case j.inJobTmp(c.Link, c):
	default:
		if pin := j.path(c.Link, c, "", "works in "); pin != "" {
			return pin
		}
	}
	for _, f := range t.FDs {
		l := f.Link
		switch {
		case strings.HasPrefix(l, "socket:["):
			sockets[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
			continue
		case strings.HasPrefix(l, "pipe:["):
			continue
		case strings.HasPrefix(l, "anon_inode:"):
			if kind := strings.TrimPrefix(l, "anon_inode:"); !dumpableAnon[kind] {
				return who + " holds a descriptor of the kernel object " + l + ", which CRIU cannot dump"
			}
			continue
		case f.StatErr != "":
			return who + " holds open " + l + ", which cannot be examined: " + f.StatErr
		case !strings.HasPrefix(l, "/") || f.Mode == 0:
			continue // another kind of anonymous descriptor, or gone
		case f.FSType == MQueueMagic:
			return who + " holds the POSIX message queue " + quoteOdd(trimDeleted(l)) + mqueueWhy
		case f.FSType == ProcMagic && under(l, "/proc"):
			// A file of the job's own /proc (its /proc/self/maps, say):
			// CRIU opens it again in the restored job's /proc, where its
			// pids are the same. The node's /proc at that path is another
			// file, so there is nothing for the destination to check.
			continue
		}
		if pin := j.locks(f); pin != "" {
			return pin
		}
		switch f.Mode & modeType {
		case modeReg:
			if f.Nlink == 0 {
				if pin := j.ghost(f, out, st["Uid"]); pin != "" {
					return pin
				}
				continue
			}
		case modeDir:
			if f.Nlink == 0 {
				return who + " holds open the removed directory " + trimDeleted(l) + ghostDirWhy
			}
		case modeChr, modeBlk:
			if !harmlessDevice[l] {
				return who + " holds open the device " + l
			}
			continue
		case modeFIFO:
			// A FIFO of the job's own /tmp (GNU make's jobserver keeps
			// one there): CRIU carries its data, and the FIFO itself is
			// in the tmpfs it carries.
			if j.inJobTmp(l, f) {
				continue
			}
			if !under(l, j.r.JobDir) || path.Dir(l) != j.r.JobDir {
				return who + " holds the named FIFO " + l + ": its buffered data is in this node's kernel, and a process outside the job may hold its other end"
			}
			continue
		case modeSock:
			return who + " holds the unix socket " + l
		default:
			// A symbolic link held with O_PATH, or a kind of file the
			// kernel does not make: nothing roam checks for it on the
			// destination.
			return who + " holds open " + quoteOdd(trimDeleted(l)) + fmt.Sprintf(", a file of a kind roam does not move (type %#o)", f.Mode&modeType)
		}
		if pin := j.path(l, f, accessOf(f.Info), "holds open "); pin != "" {
			return pin
		}
	}
	for _, m := range t.Maps {
		p := m.Path
		switch {
		case strings.HasPrefix(p, "/SYSV") && strings.HasSuffix(p, " (deleted)"):
			if !ownIPC {
				return who + " attaches the SysV shared memory segment with key 0x" + strings.TrimSuffix(strings.TrimPrefix(p, "/SYSV"), " (deleted)") + " of the node's IPC namespace, which the job shares"
			}
			continue
		case m.StatErr != "":
			return who + " maps " + p + ", which cannot be examined: " + m.StatErr
		case m.Mode == 0:
			continue
		case (p == "/dev/zero (deleted)" || strings.HasPrefix(p, "/memfd:")) && m.Nlink == 0:
			continue // shared anonymous memory, a memfd: CRIU carries them
		case m.Mode&modeType != modeReg:
			if m.Mode&modeType == modeChr && harmlessDevice[p] {
				continue
			}
			return who + " maps " + p + ", which is not a regular file"
		case m.Nlink == 0:
			if pin := j.ghost(m.Entry, out, st["Uid"]); pin != "" {
				return pin
			}
			continue
		}
		if j.inJobTmp(p, m.Entry) {
			continue // the file moves in the tmpfs, and so its pages
		}
		same := Shared(p, j.r.Shared)
		if m.SharedWrite && !same && !under(p, j.r.JobDir) {
			return who + " maps " + p + " shared and writable, on this node's own filesystem (shared directories: " + strings.Join(j.r.Shared, ", ") + ")"
		}
		access := "r"
		if m.SharedWrite {
			access = "rw"
		}
		j.add(p, m.Entry, access, same)
	}
	return ""
}

// path is the rule of a live file or directory the job reaches by path:
// in the job's directory or its own /tmp it moves with the job; in a
// shared directory the destination must reach the same file; elsewhere it
// is this node's own.
func (j *judge) path(p string, e Entry, access, verb string) string {
	if j.inJobTmp(p, e) {
		return "" // it moves in the job's own tmpfs
	}
	if under(p, j.r.JobDir) {
		// The stream carries the directory's own files, not deeper ones.
		if p != j.r.JobDir && path.Dir(p) != j.r.JobDir {
			return verb + p + ", below the job's own directory: only the files directly in it move"
		}
		return ""
	}
	if !Shared(p, j.r.Shared) {
		return verb + p + ", on this node's own filesystem (shared directories: " + strings.Join(j.r.Shared, ", ") + ")"
	}
	j.add(p, e, access, true)
	return ""
}

// add lists a file for the destination to check, once.
func (j *judge) add(p string, e Entry, access string, same bool) {
	if !strings.HasPrefix(p, "/") || under(p, j.r.JobDir) {
		return
	}
	if e.Mode&modeType != modeReg {
		access = ""
	}
	if i, ok := j.seen[p]; ok {
		j.files[i].Access = widerAccess(j.files[i].Access, access)
		j.files[i].Same = j.files[i].Same || same
		return
	}
	j.seen[p] = len(j.files)
	j.files = append(j.files, OpenFile{Path: p, Access: access, FSID: e.FSID, Ino: e.Ino, Same: same})
}

// ghost is the rule of a deleted file the job holds (open or mapped):
// roam carries its content with the images up to the ghost limit, and the
// destination makes it again as a file without a name (O_TMPFILE) in its
// directory, which it opens as the job's owner without symlinks, and
// hands it to CRIU (WithKeys, and the destination's check). Nothing is
// made or opened at the file's own path: its directory need be no
// particular one, only one the owner may write in, and is not listed. A
// deleted file in the job's own directory (the spool, root's) is CRIU's
// to carry, as root's files there are.
func (j *judge) ghost(e Entry, out *Verdict, uids string) string {
	name := trimDeleted(e.Link)
	if strings.HasPrefix(e.Link, "/memfd:") {
		return "" // a memfd: CRIU carries its content whatever its size
	}
	// The file is made again as the owner, with its mode: only a file of
	// the process's own user, with no set-user-id or set-group-id bit (an
	// old setuid binary a job kept open across an upgrade, say).
	fs := strings.Fields(uids)
	if len(fs) == 0 || fs[0] != strconv.FormatUint(uint64(e.UID), 10) || e.Mode&0o6000 != 0 {
		return "holds the deleted file " + name + " of uid " + strconv.FormatUint(uint64(e.UID), 10) + ", mode " + strconv.FormatUint(uint64(e.Mode&0o7777), 8) +
			": only a file of the job's own user without set-id bits moves as a ghost"
	}
	// In the job's own /tmp, CRIU carries the file in the tmpfs and makes
	// it again by its path, as root: a user's job without a user namespace
	// of its own lets its user reach that tmpfs while it is dumped (through
	// the program's /proc/PID/root) and swap a directory on the path.
	if fs[0] != "0" && j.inJobTmp(name, e) {
		return "holds the deleted file " + name + " in its own /tmp: CRIU would make it again there as root, by a path its user can redirect while it is dumped"
	}
	key := [3]uint64{uint64(uint32(e.FSID[0])), uint64(uint32(e.FSID[1])), e.Ino}
	if j.ghosts[key] && e.Ino != 0 {
		return "" // held twice (open and mapped): one ghost
	}
	// Its content is copied whole (holes as zeros): the larger of its
	// size and what it holds on disk counts.
	size := max(e.Alloc, e.Size)
	if out.Ghosts+size > j.r.GhostLimit {
		return "holds the deleted file " + name + " (" + strconv.FormatInt(size, 10) + " bytes, with the others " +
			strconv.FormatInt(out.Ghosts+size, 10) + "; deleted files of up to " + strconv.FormatInt(j.r.GhostLimit, 10) +
			" bytes in all move with a job: limits.ghost_bytes)"
	}
	if j.ghosts == nil {
		j.ghosts = map[[3]uint64]bool{}
	}
	j.ghosts[key] = true
	dir := path.Dir(name)
	// In the job's own directory or tmpfs, the directory moves with the
	// job; elsewhere the destination makes the file again without a name
	// (asuser's TmpFile), in whatever directory the owner may write there.
	if d := j.dirs[dir]; !under(name, j.r.JobDir) && !j.inJobTmp(name, e) && (d.Mode&modeType != modeDir || d.Nlink == 0) {
		return "holds the deleted file " + name + ", whose directory " + dir + " is gone or not a directory"
	}
	out.Ghosts += size
	return ""
}

// locks is the rule of the file locks (flock, POSIX, OFD locks, leases)
// held through a descriptor, from its fdinfo. CRIU takes them again on the
// restore; but the source's copy keeps them until the move commits, so a
// lock on a file the destination shares (any file outside the job's own
// directory and tmpfs) could not be taken there.
func (j *judge) locks(f Entry) string {
	for _, line := range strings.Split(f.Info, "\n") {
		l, ok := strings.CutPrefix(line, "lock:")
		if !ok {
			continue
		}
		// The job's own files: the restored copy's are other files,
		// which no one else holds.
		if under(f.Link, j.r.JobDir) || j.inJobTmp(trimDeleted(f.Link), f) {
			return ""
		}
		kind := "a"
		if fs := strings.Fields(l); len(fs) >= 2 {
			kind = "a " + fs[1]
		}
		return "holds " + kind + " lock on " + trimDeleted(f.Link) + ": the copy that is moved keeps it until the move commits, so the restored copy could not take it again"
	}
	return ""
}

// statusFields are the "Key:\tvalue" lines of /proc/PID/status.
func statusFields(status string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(status, "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok {
			out[k] = strings.TrimSpace(v)
		}
	}
	return out
}

func trimDeleted(l string) string { return strings.TrimSuffix(l, " (deleted)") }

// accessOf is a descriptor's access mode from its fdinfo: "r", "w", "rw".
func accessOf(fdinfo string) string {
	for _, line := range strings.Split(fdinfo, "\n") {
		if v, ok := strings.CutPrefix(line, "flags:"); ok {
			f, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
			if err != nil {
				return "r"
			}
			switch f & 3 { // O_ACCMODE
			case 1: // O_WRONLY
				return "w"
			case 2: // O_RDWR
				return "rw"
			}
			return "r"
		}
	}
	return "r"
}

// widerAccess joins two ways of holding one file.
func widerAccess(a, b string) string {
	r := strings.Contains(a, "r") || strings.Contains(b, "r")
	w := strings.Contains(a, "w") || strings.Contains(b, "w")
	switch {
	case r && w:
		return "rw"
	case w:
		return "w"
	case r:
		return "r"
	}
	return ""
}

// EstablishedTCP parses a /proc/PID/net/tcp or tcp6 table: the established
// connections with their socket inodes and remote addresses.
func EstablishedTCP(table string) []TCPConn {
	var out []TCPConn
	lines := strings.Split(table, "\n")
	if len(lines) > 0 {
		lines = lines[1:]
	}
	for _, line := range lines {
		fs := strings.Fields(line)
		if len(fs) < 10 || fs[3] != "01" {
			continue
		}
		out = append(out, TCPConn{Inode: fs[9], Remote: HexAddr(fs[2])})
	}
	return out
}

// HexAddr turns /proc/net/tcp's "0100007F:1F90" into "127.0.0.1:8080".
func HexAddr(s string) string {
	h, p, ok := strings.Cut(s, ":")
	if !ok {
		return s
	}
	raw, err := hex.DecodeString(h)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return s
	}
	// The kernel prints each 32-bit word in host (little-endian) order.
	for i := 0; i+4 <= len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	port, err := strconv.ParseUint(p, 16, 16)
	if err != nil {
		return s
	}
	addr, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(addr.Unmap(), uint16(port)).String()
}

// under says whether path is dir or inside it.
// Under says whether path is dir or below it.
func Under(path, dir string) bool { return under(path, dir) }

func under(path, dir string) bool {
	return path == dir || strings.HasPrefix(path, strings.TrimSuffix(dir, "/")+"/")
}

// SystemDirs hold the operating system's files, taken to be the same on
// every node (the deployment guide asks for one OS install): a job that
// holds a library or a locale file open, or works in /, still moves.
var SystemDirs = []string{"/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/etc", "/opt", "/proc", "/sys"}

// Shared says whether path is in one of the shared directories (the
// filesystems every node mounts at the same path) or the system's.
func Shared(path string, shared []string) bool {
	if path == "/" {
		return true
	}
	for _, ds := range [][]string{shared, SystemDirs} {
		for _, d := range ds {
			if under(path, d) {
				return true
			}
		}
	}
	return false
}
