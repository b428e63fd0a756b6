// Package netx holds the byte-pipe helpers that both the agent and the
// CRIU side of a migration use: a bidirectional splice of two connections
// and a Unix socket pair whose one end goes to a child process.
package netx

import (
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
)

// Splice copies both ways between a (read from aIn, which may hold bytes
// a already delivered) and b until both directions end, then closes both;
// n, when not nil, counts the bytes from b to a.
func Splice(a, b net.Conn, aIn io.Reader, n *atomic.Int64) {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(b, aIn)
		CloseWrite(b)
	}()
	go func() {
		defer wg.Done()
		k, _ := io.Copy(a, b)
		if n != nil {
			n.Add(k)
		}
		CloseWrite(a)
	}()
	wg.Wait()
	a.Close()
	b.Close()
}

// CloseWrite ends c's sending side, or closes c when it cannot half-close.
func CloseWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
		return
	}
	_ = c.Close()
}

// SocketPair returns a connected pair of Unix stream sockets: one as a
// net.Conn for this process, one as a file for a child.
func SocketPair() (net.Conn, *os.File, error) {
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("socket pair: %w", err)
	}
	f := os.NewFile(uintptr(fds[0]), "page-socket")
	defer f.Close()
	c, err := net.FileConn(f)
	if err != nil {
		syscall.Close(fds[1])
		return nil, nil, err
	}
	return c, os.NewFile(uintptr(fds[1]), "criu-page-socket"), nil
}
