package job

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A job that exits 0 while its node's state disk is full keeps its exit
// status: the status file's room is taken when the job starts. Without
// it roam-init's write failed (ENOSPC) and the agent took the job for
// killed before it could write (137).
func TestStatusOnAFullDisk(t *testing.T) {
	l := userNSLauncher(t)
	if err := os.MkdirAll(l.SpoolRoot, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("roam-test", l.SpoolRoot, "tmpfs", 0, "size=1m,mode=755"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(l.SpoolRoot, unix.MNT_DETACH) })
	// Not under /tmp, which is the job's own.
	dir, err := os.MkdirTemp("/var/lib", "roam-status-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil { // the job's user looks for the gate
		t.Fatal(err)
	}
	gate := filepath.Join(dir, "go")
	p, err := l.Start(Spec{ID: "1.1", UID: 70001, GID: 70001, Groups: []uint32{70001}, Cwd: "/",
		Argv: []string{"/bin/sh", "-c", "echo up; while [ ! -e " + gate + " ]; do sleep 0.05; done; exit 0"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Kill(p.PID, p.StartTix, 5*time.Second); _ = p.Wait() })
	if out := waitUp(p); out != "up\n" {
		t.Fatalf("the job printed %q", out)
	}
	fill, err := os.Create(filepath.Join(l.SpoolRoot, "fill"))
	if err != nil {
		t.Fatal(err)
	}
	for err == nil {
		_, err = fill.Write(make([]byte, 64<<10))
	}
	fill.Close()
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_ = p.Wait()
	if code, ok := ReadStatus(p.Dir); !ok || code != 0 {
		t.Fatalf("the job's status on a full disk: %d, %v; want 0", code, ok)
	}
}
