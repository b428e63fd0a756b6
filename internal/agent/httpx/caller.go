package httpx

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ctxKey keys the caller's credentials in a request's context.
type ctxKey struct{}

// Caller is who is on the other end of the unix socket, from SO_PEERCRED
// and SO_PEERGROUPS: the kernel's word at connect time, never the
// request's, nor /proc read later (where the pid may be another process's
// by then).
type Caller struct {
	UID, GID uint32
	PID      int32
	Groups   []uint32 // supplementary groups
}

// MayAct says whether c may act on a job of user uid (read it, signal
// it, checkpoint it): root may, and the job's owner.
func (c Caller) MayAct(uid uint32) bool { return c.UID == 0 || c.UID == uid }

// CallerOf returns the caller of a request on the API socket.
func CallerOf(r *http.Request) (Caller, bool) {
	c, ok := r.Context().Value(ctxKey{}).(Caller)
	return c, ok
}

// PeerCred reads SO_PEERCRED from a unix connection.
func PeerCred(c net.Conn) (Caller, error) {
	if w, ok := c.(interface{ NetConn() net.Conn }); ok {
		c = w.NetConn() // held to the connection limits
	}
	uc, ok := c.(*net.UnixConn)
	if !ok {
		return Caller{}, errors.New("not a unix connection")
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return Caller{}, err
	}
	var cred *syscall.Ucred
	var groups []uint32
	var cerr, gerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
		groups, gerr = peerGroups(int(fd))
	}); err != nil {
		return Caller{}, err
	}
	if cerr != nil {
		return Caller{}, cerr
	}
	if gerr != nil {
		return Caller{}, gerr
	}
	return Caller{UID: cred.Uid, GID: cred.Gid, PID: cred.Pid, Groups: groups}, nil
}

// peerGroups reads SO_PEERGROUPS: the peer's supplementary groups when it
// connected. The kernel says how much room it needs when there is too
// little.
func peerGroups(fd int) ([]uint32, error) {
	n := 64
	for {
		buf := make([]uint32, n)
		size := uint32(4 * n)
		_, _, errno := unix.Syscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_PEERGROUPS,
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&size)), 0)
		switch {
		case errno == 0:
			return buf[:size/4], nil
		case errno == unix.ERANGE && int(size/4) > n && size/4 <= 1<<16:
			n = int(size / 4)
		default:
			return nil, fmt.Errorf("SO_PEERGROUPS: %w", errno)
		}
	}
}

// WithCaller is ctx with the caller of its requests.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, ctxKey{}, c)
}
