package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// owner is whose jobs a test runs: the tests' job user by default, as on a
// real cluster every job is a user's; root only where a test is about root.
type owner struct {
	name   string
	uid    uint32
	gid    uint32
	groups []uint32
}

// root is root, as a job's owner.
var root = owner{name: "root"}

// jobUser is the job user TestMain makes: a uid above 65,535, as LDAP
// sites hand out, with a primary group and two supplementary ones, one of
// them above 65,535 too.
var jobUser = owner{name: "roame2e", uid: 70701, gid: 70701, groups: []uint32{70701, 70710, 170711}}

// jobUserGroups are jobUser's supplementary groups, by name and gid.
var jobUserGroups = []struct {
	name string
	gid  uint32
}{{"roame2ea", 70710}, {"roame2eb", 170711}}

// jobUserLock is held shared by every e2e run of this host while it
// runs (the tests of several checkouts may run at once): the user is made
// by the first and removed by the last.
const jobUserLock = "/run/roam-e2e-jobuser.lock"

// makeJobUser makes jobUser and its groups unless another run of the tests
// has, and returns what the run calls at its end: it removes them when no
// other run holds the lock.
func makeJobUser() (func(), error) {
	f, err := os.OpenFile(jobUserLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, err
	}
	if got, err := exec.Command("id", jobUser.name).Output(); err != nil || !strings.Contains(string(got), "uid="+strconv.Itoa(int(jobUser.uid))+"(") {
		if err := addJobUser(); err != nil {
			f.Close()
			return nil, err
		}
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH); err != nil {
		f.Close()
		return nil, err
	}
	return func() {
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			dropJobUser()
			os.Remove(jobUserLock)
		}
		f.Close()
	}, nil
}

// addJobUser makes jobUser and its groups, after removing what an earlier,
// killed run left of them.
func addJobUser() error {
	dropJobUser()
	groups := append([]struct {
		name string
		gid  uint32
	}{{jobUser.name, jobUser.gid}}, jobUserGroups...)
	for _, g := range groups {
		if out, err := exec.Command("groupadd", "-g", strconv.Itoa(int(g.gid)), g.name).CombinedOutput(); err != nil {
			return fmt.Errorf("groupadd %s: %v: %s", g.name, err, out)
		}
	}
	names := make([]string, len(jobUserGroups))
	for i, g := range jobUserGroups {
		names[i] = g.name
	}
	out, err := exec.Command("useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", "-u", strconv.Itoa(int(jobUser.uid)),
		"-g", jobUser.name, "-G", strings.Join(names, ","), jobUser.name).CombinedOutput()
	if err != nil {
		return fmt.Errorf("useradd %s: %v: %s", jobUser.name, err, out)
	}
	if got, err := exec.Command("id", "-g", jobUser.name).Output(); err != nil || strings.TrimSpace(string(got)) != strconv.Itoa(int(jobUser.gid)) {
		return fmt.Errorf("%s's primary group is %q, want %d (another group has that gid)", jobUser.name, got, jobUser.gid)
	}
	return nil
}

// dropJobUser removes jobUser and its groups, if they exist.
func dropJobUser() {
	_ = exec.Command("userdel", jobUser.name).Run()
	for _, g := range jobUserGroups {
		_ = exec.Command("groupdel", g.name).Run()
	}
	_ = exec.Command("groupdel", jobUser.name).Run()
}

// roamAs is the roam CLI against this cluster, run by o.
func (c *cluster) roamAs(o owner, args ...string) *exec.Cmd {
	cmd := c.roamCmd(args...)
	if o.uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: o.uid, Gid: o.gid, Groups: o.groups}}
	}
	return cmd
}

// mustRunAs runs the roam CLI as o and returns its output; it fails the
// test on an error.
func (c *cluster) mustRunAs(o owner, args ...string) string {
	c.t.Helper()
	out, err := c.roamAs(o, args...).CombinedOutput()
	if err != nil {
		c.t.Fatalf("roam %v as %s: %v: %s", args, o.name, err, out)
	}
	return string(out)
}

// userDir is a new directory of the job user's, in a directory every node
// shares, removed with the test (t.TempDir's parent is root's alone).
func userDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, int(jobUser.uid), int(jobUser.gid)); err != nil {
		t.Fatal(err)
	}
	return dir
}

// sharedDir is a new directory of root's, mode 0755, in a directory every
// node shares, removed with the test.
func sharedDir(t *testing.T, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp(e2eRoot, prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
