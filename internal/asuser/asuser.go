// Package asuser opens files as another user would: on an OS thread of
// its own whose credentials are switched to the user's (uid, gid and
// supplementary groups) with the raw system calls, which change that
// thread only, and which ends with the work. Paths are resolved without
// following any symlink, and nothing that is not a regular file is
// opened: a FIFO or a device is only looked up. It is how the root agent
// checks, before a migration freezes anything, that a job's files on the
// destination are the very files the job has open and that its owner may
// open them, and opens the descriptors CRIU's restore then takes instead
// of the paths (Want.Keep), and the unnamed files that stand for the
// job's deleted ones (Want.TmpFile); and how a home opens the files a
// sweep's output goes to (Want.Create), never root following a user's
// path. Stat looks paths up as the user, following symlinks as the
// user's own exec would: how a node checks a job's working directory and
// program before it starts it.
//
// It must not run anything but these opens and lookups on that thread. A descriptor
// it hands back carries no credential: what the owner could open, opened
// so.
package asuser

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Cred is whom to open as.
type Cred struct {
	UID, GID uint32
	Groups   []uint32
}

// Want is a file to open, and how.
type Want struct {
	Path string
	// Access: "r", "w" or "rw" opens a regular file so (a directory or
	// another kind is only looked up); "" only looks it up.
	Access string
	// Keep: the file must be a regular one, and the descriptor opened
	// with Access (non-blocking, never a controlling terminal) is handed
	// back in Got.File.
	Keep bool
	// TmpFile: Path is a directory, in which a new regular file without a
	// name is made (O_TMPFILE; where the filesystem has none, a file made
	// under a random name and unlinked at once), open for reading and
	// writing, mode 0600, and handed back in Got.File. Got's identity is
	// the directory's.
	TmpFile bool
	// Create: Path is a regular file to write, made (mode 0600, the
	// user's) when missing, never through a symlink, not cut: its
	// descriptor, opened write-only, is handed back in Got.File.
	Create bool
}

// Got is what opening a Want found: the file's identity, or why not.
type Got struct {
	FSID [2]int32 // statfs's f_fsid: the same on every client of one filesystem
	Ino  uint64
	Mode uint32
	Err  error
	// File is the descriptor a Keep or TmpFile asked for (nil with Err).
	// The caller closes it.
	File *os.File
}

// Open opens each file as cred would, without following symlinks, and
// says what it found. The error is for the thread itself (credentials that
// could not be taken); each file's own failure is in its Got.
func Open(cred Cred, wants []Want) ([]Got, error) {
	got := make([]Got, len(wants))
	err := as(cred, func() {
		for i, w := range wants {
			got[i] = open(w)
		}
	})
	if err != nil {
		return nil, err
	}
	return got, nil
}

// as runs work on an OS thread of its own with cred's credentials, and
// waits for it. The error is the thread's, whose credentials could not
// be taken (work did not run then).
func as(cred Cred, work func()) error {
	ch := make(chan error, 1)
	go func() {
		// Locked and never unlocked: the thread, with the user's
		// credentials, ends with this goroutine. Threads the runtime makes
		// later come from its template thread, not from this one.
		runtime.LockOSThread()
		if err := become(cred); err != nil {
			ch <- err
			return
		}
		work()
		ch <- nil
	}()
	return <-ch
}

// become switches this thread's credentials: groups first, the gid next,
// the uid last (after which the thread could not switch back).
func become(c Cred) error {
	var p uintptr
	if len(c.Groups) > 0 {
		p = uintptr(unsafe.Pointer(&c.Groups[0]))
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, uintptr(len(c.Groups)), p, 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(c.GID), uintptr(c.GID), uintptr(c.GID)); e != 0 {
		return fmt.Errorf("setresgid %d: %w", c.GID, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(c.UID), uintptr(c.UID), uintptr(c.UID)); e != 0 {
		return fmt.Errorf("setresuid %d: %w", c.UID, e)
	}
	runtime.KeepAlive(c.Groups)
	return nil
}

// open looks the path up (as this thread's user, no symlink on the way),
// then, for a regular file, opens it with the access asked: the kernel
// checks the user's permission then. A Keep keeps that descriptor; a
// TmpFile makes its file in the directory looked up.
func open(w Want) Got {
	if w.Create {
		return create(w.Path)
	}
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	if w.TmpFile {
		how.Flags |= unix.O_DIRECTORY
	}
	fd, err := unix.Openat2(unix.AT_FDCWD, w.Path, &how)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return Got{Err: fmt.Errorf("%s: a symlink on the path", w.Path)}
		}
		return Got{Err: fmt.Errorf("%s: %w", w.Path, err)}
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return Got{Err: fmt.Errorf("%s: %w", w.Path, err)}
	}
	var sfs unix.Statfs_t
	if err := unix.Fstatfs(fd, &sfs); err != nil {
		return Got{Err: fmt.Errorf("%s: %w", w.Path, err)}
	}
	g := Got{FSID: sfs.Fsid.Val, Ino: st.Ino, Mode: st.Mode}
	if w.TmpFile {
		if g.File, err = tmpFile(fd); err != nil {
			g.Err = fmt.Errorf("%s: make a file without a name in it: %w", w.Path, err)
		}
		return g
	}
	if w.Keep && (st.Mode&unix.S_IFMT != unix.S_IFREG || w.Access == "") {
		g.Err = fmt.Errorf("%s: not a regular file (mode %#o)", w.Path, st.Mode)
		return g
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || w.Access == "" {
		return g
	}
	flags := unix.O_RDONLY
	switch w.Access {
	case "w":
		flags = unix.O_WRONLY
	case "rw":
		flags = unix.O_RDWR
	}
	// Reopening the O_PATH descriptor checks the permission of the file
	// it holds, not of whatever the path names by now.
	rfd, err := unix.Open("/proc/thread-self/fd/"+strconv.Itoa(fd), flags|unix.O_CLOEXEC|unix.O_NOCTTY|unix.O_NONBLOCK, 0)
	if err != nil {
		g.Err = fmt.Errorf("%s: %w", w.Path, err)
		return g
	}
	if w.Keep {
		g.File = os.NewFile(uintptr(rfd), w.Path)
		return g
	}
	unix.Close(rfd)
	return g
}

// tmpFile makes a regular file without a name in the directory dir (an
// O_PATH descriptor), as this thread's user: the kernel checks the user's
// write permission on that directory. A filesystem without O_TMPFILE
// (NFS) gets a file of a random name, made without following a symlink
// and unlinked at once, in the same directory.
func tmpFile(dir int) (*os.File, error) {
	fd, err := unix.Openat(dir, ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err == nil {
		return os.NewFile(uintptr(fd), "(deleted)"), nil
	}
	if !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.EISDIR) {
		return nil, err
	}
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	name := ".roam-" + hex.EncodeToString(b[:])
	fd, err = unix.Openat(dir, name, unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Unlinkat(dir, name, 0); err != nil {
		unix.Close(fd)
		return nil, err
	}
	return os.NewFile(uintptr(fd), "(deleted)"), nil
}

// create opens path for writing as this thread's user, making it when
// missing; a symlink anywhere on the path, the last part included, is
// refused, and so is anything but a regular file (opened non-blocking,
// so a FIFO put there does not hold the thread, then closed).
func create(path string) Got {
	how := unix.OpenHow{Flags: unix.O_WRONLY | unix.O_CREAT | unix.O_CLOEXEC | unix.O_NOCTTY | unix.O_NONBLOCK, Mode: 0o600,
		Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(unix.AT_FDCWD, path, &how)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return Got{Err: fmt.Errorf("%s: a symlink on the path", path)}
		}
		return Got{Err: fmt.Errorf("%s: %w", path, err)}
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return Got{Err: fmt.Errorf("%s: not a regular file (mode %#o)", path, st.Mode)}
	}
	var sfs unix.Statfs_t
	_ = unix.Fstatfs(fd, &sfs)
	return Got{FSID: sfs.Fsid.Val, Ino: st.Ino, Mode: st.Mode, File: os.NewFile(uintptr(fd), path)}
}
