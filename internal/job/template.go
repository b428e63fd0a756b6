package job

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"

	"roam/internal/execlock"
)

// Template is the node's template of a job's mount namespace: the
// agent's mounts less those every job drops (roam-init -T), which each
// job's roam-init copies (-M) rather than copying the agent's and
// unmounting some 30 of them itself. Each unmount waits for an RCU grace
// period of the kernel's, and they were the better part of a job's start
// (docs/benchmarks.md, job-start). The template is made again whenever
// the agent's own mount table changed since (a filesystem mounted on the
// host later reaches the jobs started after it, as it did when each job
// copied the agent's table), and not at all where roam-init cannot make
// it: each job then drops the mounts itself. Safe for concurrent use.
type Template struct {
	mu sync.Mutex
	ns *os.File // the template's namespace; nil: none
	// from is the agent's mount table the template was made from (or
	// failed to be made from: it is tried again once the table changes).
	from []byte
	// table is the agent's /proc/self/mountinfo, kept open: poll(2) on it
	// says when the mount table changed since it was last read, so that a
	// start reads it only then (a read cost more than the rest of what
	// the agent does for a start).
	table *os.File
}

// use calls f with the template's namespace, made first when there is
// none of the agent's mount table of now; nil when none can be made. The
// namespace stays open until f returns.
func (t *Template) use(init string, execMu *sync.Mutex, f func(ns *os.File) error) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if mi, ok := t.changed(); ok {
		if t.ns != nil {
			t.ns.Close()
		}
		t.ns, t.from = nil, mi
		if ns, err := makeTemplate(init, execMu); err == nil {
			t.ns = ns
		}
	}
	return f(t.ns)
}

// changed reads the agent's mount table when it may have changed since
// the last read, and returns it when it is not the template's (t.mu
// held).
func (t *Template) changed() ([]byte, bool) {
	if t.table != nil {
		fds := []unix.PollFd{{Fd: int32(t.table.Fd()), Events: unix.POLLPRI}}
		if n, err := unix.Poll(fds, 0); err == nil && n == 0 {
			return nil, false
		}
	} else if f, err := os.Open("/proc/self/mountinfo"); err == nil {
		t.table = f
	} else {
		return nil, false
	}
	mi, err := io.ReadAll(io.NewSectionReader(t.table, 0, 1<<30))
	if err != nil || bytes.Equal(mi, t.from) {
		return nil, false
	}
	return mi, true
}

// makeTemplate has roam-init make the template in a mount namespace of
// its own (roam-init -T), and opens it.
func makeTemplate(init string, execMu *sync.Mutex) (*os.File, error) {
	cmd := exec.Command(init, "-T")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := execlock.Start(cmd, execMu); err != nil {
		return nil, err
	}
	// Its stdin's end ends it, once the namespace is open (or not).
	defer func() { in.Close(); _ = cmd.Wait() }()
	var b [1]byte
	if _, err := io.ReadFull(out, b[:]); err != nil {
		return nil, fmt.Errorf("roam-init -T: %v %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	return os.Open("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/ns/mnt")
}
