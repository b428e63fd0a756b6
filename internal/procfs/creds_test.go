package procfs

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

// TreeCreds reads this process's own credentials.
func TestTreeCredsOfThisProcess(t *testing.T) {
	self, err := TreeCreds(os.Getpid())
	if err != nil || len(self) == 0 || self[0].UIDs[0] != uint32(os.Getuid()) {
		t.Fatalf("this process: %+v %v", self, err)
	}
}

// A process of a user that runs an execute-only program is not dumpable
// (the kernel will not let its user read what it loaded), and TreeCreds
// says so; the same program readable leaves it dumpable.
func TestTreeCredsSaysWhichTaskIsNotDumpable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root, to run a program as uid 70001")
	}
	dir, err := os.MkdirTemp("", "roam-nodump-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	prog, err := os.ReadFile("/bin/sleep")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		mode   os.FileMode
		noDump bool
	}{{0o711, true}, {0o755, false}} {
		path := filepath.Join(dir, fmt.Sprintf("sleep-%o", tc.mode))
		if err := os.WriteFile(path, prog, tc.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, tc.mode); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(path, "1000")
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 70001, Gid: 70001, Groups: []uint32{70002, 70003}}}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		creds, err := TreeCreds(cmd.Process.Pid)
		if err != nil || len(creds) != 1 {
			t.Fatalf("mode %o: %+v %v", tc.mode, creds, err)
		}
		if c := creds[0]; c.NoDump != tc.noDump || c.UIDs != [4]uint32{70001, 70001, 70001, 70001} || !slices.Equal(c.Groups, []uint32{70002, 70003}) {
			t.Errorf("mode %o: %+v, want NoDump %v", tc.mode, c, tc.noDump)
		}
	}
}
