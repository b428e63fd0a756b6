package ckpt

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"

	"golang.org/x/sys/unix"
)

// MQueues lists the POSIX message queues of the IPC namespace of process
// pid: CRIU dumps a job's IPC namespace with its SysV objects but without
// its message queues, which a restore would lose.
//
// A namespace's queues are the files of an mqueue filesystem mounted from
// inside it. A thread of the agent's own joins the namespace, in a mount
// namespace of its own (private, so nothing propagates to the node's
// mounts), mounts one over /tmp there and reads it. That thread is never
// handed back to the Go scheduler: it ends with its goroutine, and its
// namespaces with it.
func MQueues(pid int) ([]string, error) {
	ns, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/ipc")
	if err != nil {
		return nil, err
	}
	defer ns.Close()
	type result struct {
		names []string
		err   error
	}
	done := make(chan result, 1)
	work := func() {
		runtime.LockOSThread() // never unlocked: see above
		names, err := readMQueues(int(ns.Fd()))
		done <- result{names, err}
	}
	held := make(chan struct{})
	go func() {
		// Go never ends the process's main thread: locked and left by its
		// goroutine, it is parked forever, and would keep the job's IPC
		// namespace alive. So this goroutine takes a thread first; on the
		// main thread it holds it while another does the work, which
		// then cannot run there.
		runtime.LockOSThread()
		if unix.Gettid() != unix.Getpid() {
			work()
			return
		}
		go work()
		<-held
		runtime.UnlockOSThread()
	}()
	r := <-done
	close(held)
	return r.names, r.err
}

// readMQueues lists the queues of the IPC namespace ns from the calling
// thread, which it leaves in that namespace and a mount namespace of its
// own.
func readMQueues(ns int) ([]string, error) {
	if err := unix.Unshare(unix.CLONE_NEWNS | unix.CLONE_FS); err != nil {
		return nil, fmt.Errorf("unshare: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return nil, fmt.Errorf("make mounts private: %w", err)
	}
	if err := unix.Setns(ns, unix.CLONE_NEWIPC); err != nil {
		return nil, fmt.Errorf("join the IPC namespace: %w", err)
	}
	err := unix.Mount("mqueue", "/tmp", "mqueue", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, "")
	if errors.Is(err, unix.ENODEV) {
		return nil, nil // a kernel without POSIX message queues
	}
	if err != nil {
		return nil, fmt.Errorf("mount mqueue: %w", err)
	}
	d, err := os.Open("/tmp")
	if err != nil {
		return nil, err
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	for i, n := range names {
		names[i] = "/" + n
	}
	sort.Strings(names)
	return names, err
}
