package asuser

import (
	"fmt"
	"net"
	"os"
	"runtime"

	"golang.org/x/sys/unix"
)

// DialUnix connects to the unix socket at path as cred: the socket's
// other end sees cred in SO_PEERCRED and SO_PEERGROUPS, which the kernel
// takes at connect. For a root program that acts as a user towards an
// agent (the benchmarks run users' jobs so); the thread that connects,
// with cred's credentials, ends with the call.
func DialUnix(cred Cred, path string) (net.Conn, error) {
	type result struct {
		fd  int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: see Open
		if err := become(cred); err != nil {
			ch <- result{-1, err}
			return
		}
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			if err = unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
				unix.Close(fd)
			}
		}
		ch <- result{fd, err}
	}()
	r := <-ch
	if r.err != nil {
		return nil, fmt.Errorf("connect to %s as uid %d: %w", path, cred.UID, r.err)
	}
	f := os.NewFile(uintptr(r.fd), path)
	defer f.Close()
	return net.FileConn(f)
}
