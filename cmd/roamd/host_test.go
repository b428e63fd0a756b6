package main

import (
	"runtime"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"roam/internal/ckpt"
)

// The node reads its own CPU, kernel and CRIU: on x86_64 the features
// roam compares include SSE2 (every x86_64 has it), the kernel is uname's
// release, and the whole fits a node's metadata's bounds.
func TestHostReadsThisNode(t *testing.T) {
	h := host(ckpt.DefaultPath(), &sync.Mutex{})
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	if h.Kernel != unix.ByteSliceToString(u.Release[:]) || h != h.Bounded() {
		t.Fatalf("host %+v; kernel %q", h, unix.ByteSliceToString(u.Release[:]))
	}
	if runtime.GOARCH == "amd64" && (!h.CPU.Has("sse2") || h.CPU.Level() < 1) {
		t.Fatalf("an x86_64 CPU without sse2: %s", h.Summary())
	}
	t.Logf("%s; kernel %s; CRIU %q", h.Summary(), h.Kernel, h.CRIU)
}
