package agent

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"roam/internal/agent/httpx"
	"slices"
	"strconv"
	"syscall"
	"testing"
)

// The caller's groups are the kernel's, taken when it connected: read
// after the caller has exited (its pid free for another process, whose
// /proc/PID/status would give its groups), they are still the caller's.
func TestCallerGroupsFromTheSocket(t *testing.T) {
	if path := os.Getenv("ROAM_TEST_CONNECT"); path != "" {
		c, err := net.Dial("unix", path)
		if err != nil {
			os.Exit(3)
		}
		_, _ = c.Write([]byte("x"))
		os.Exit(0)
	}
	if os.Getuid() != 0 {
		t.Fatal("needs root: the caller runs as another user")
	}
	// Not t.TempDir: its parent is root's alone.
	dir, err := os.MkdirTemp("", "roam-peercred-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "api.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if err := os.Chmod(path, 0o777); err != nil {
		t.Fatal(err)
	}
	// The test binary, where user 1001 can run it.
	self, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	helper := filepath.Join(dir, "caller")
	if err := os.WriteFile(helper, self, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(helper, "-test.run=^TestCallerGroupsFromTheSocket$")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "ROAM_TEST_CONNECT="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1001, Gid: 1001, Groups: []uint32{5001, 5002, 5003}}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	conn, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	b := make([]byte, 1)
	_, _ = conn.Read(b)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the caller: %v", err)
	}
	if _, err := os.Stat("/proc/" + strconv.Itoa(cmd.Process.Pid)); err == nil {
		t.Fatalf("pid %d still exists", cmd.Process.Pid)
	}
	c, err := httpx.PeerCred(conn)
	if err != nil {
		t.Fatal(err)
	}
	if c.UID != 1001 || c.GID != 1001 || !slices.Equal(c.Groups, []uint32{5001, 5002, 5003}) {
		t.Fatalf("caller %+v, want uid 1001, gid 1001, groups 5001 5002 5003", c)
	}
}
