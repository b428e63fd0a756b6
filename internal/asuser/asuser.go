// Package asuser opens files as another user would: on an OS thread of
// its own whose credentials are switched to the user's (uid, gid and
// supplementary groups) with the raw system calls, which change that
// thread only, and which ends with the work. Paths are resolved without
// following any symlink. It is how the root agent checks, before a
// migration freezes anything, that a job's files on the destination are
// the very files the job has open and that its owner may open them: CRIU
// then reopens them as root.
//
// It must not run anything but the checks on that thread, and never hands
// a descriptor back.
package asuser

import (
	"errors"
	"fmt"
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
}

// Got is what opening a Want found: the file's identity, or why not.
type Got struct {
	FSID [2]int32 // statfs's f_fsid: the same on every client of one filesystem
	Ino  uint64
	Mode uint32
	Err  error
}

// Open opens each file as cred would, without following symlinks, and
// says what it found. The error is for the thread itself (credentials that
// could not be taken); each file's own failure is in its Got.
func Open(cred Cred, wants []Want) ([]Got, error) {
	type result struct {
		got []Got
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// Locked and never unlocked: the thread, with the user's
		// credentials, ends with this goroutine. Threads the runtime makes
		// later come from its template thread, not from this one.
		runtime.LockOSThread()
		if err := become(cred); err != nil {
			ch <- result{nil, err}
			return
		}
		got := make([]Got, len(wants))
		for i, w := range wants {
			got[i] = open(w)
		}
		ch <- result{got, nil}
	}()
	r := <-ch
	return r.got, r.err
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
// checks the user's permission then.
func open(w Want) Got {
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
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
	unix.Close(rfd)
	return g
}
