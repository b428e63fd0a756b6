package job

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"roam/internal/migrate"
	"roam/internal/procfs"
)

// A user's job started with UserNS runs in a user namespace of its own:
// the program with the user's ids and groups, the same numbers as outside,
// and roam-init as root of that namespace, which the credentials check
// leaves out, and which the user's processes outside cannot signal.
func TestUserJobInItsOwnUserNamespace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root (namespaces, another uid)")
	}
	// Not under /tmp, which the job's own /tmp hides from roam-init's
	// second exec.
	dir, err := os.MkdirTemp("/var/lib", "roam-userns-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	init := filepath.Join(dir, "roam-init")
	if out, err := exec.Command("gcc", "-O2", "-static", "-o", init, "../../cinit/roam-init.c").CombinedOutput(); err != nil {
		t.Fatalf("build roam-init: %v\n%s", err, out)
	}
	if err := UserNSAllowed(init, nil); err != nil {
		t.Fatalf("this host allows user namespaces (the tests need it): %v", err)
	}
	const uid, gid = 70001, 70001
	groups := []uint32{70001, 1001, 170002}
	l := Launcher{Init: init, SpoolRoot: filepath.Join(dir, "spool"), ExecMu: &sync.Mutex{}, UserNS: true}
	p, err := l.Start(Spec{ID: "1.1", UID: uid, GID: gid, Groups: groups, Cwd: "/",
		Argv: []string{"/bin/sh", "-c", "id -u; id -g; id -G; cat /proc/self/uid_map; echo up; exec sleep 60"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Kill(p.PID, p.StartTix, 5*time.Second); _ = p.Wait() })
	var out string
	for end := time.Now().Add(10 * time.Second); !strings.Contains(out, "up\n") && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(p.Dir, "stdout"))
		out = string(b)
	}
	want := "70001\n70001\n70001 1001 170002\n         0          0 4294967295\nup\n"
	if out != want {
		t.Fatalf("the job printed %q, want %q (stderr: %s)", out, want, readFile(filepath.Join(p.Dir, "stderr")))
	}
	self, _ := os.Readlink("/proc/self/ns/user")
	if ns, _ := os.Readlink("/proc/" + strconv.Itoa(p.PID) + "/ns/user"); ns == self || ns == "" {
		t.Fatalf("roam-init's user namespace %q, the host's %q: want one of its own", ns, self)
	}
	creds, err := procfs.TreeCreds(p.PID)
	if err != nil || len(creds) < 2 {
		t.Fatalf("tree creds: %v, %d tasks", err, len(creds))
	}
	if c := creds[0]; !c.JobInit || c.UIDs != [4]uint32{} || c.NoDump {
		t.Fatalf("roam-init: %+v, want JobInit, uid 0, dumpable", c)
	}
	if err := migrate.CheckCreds(uid, gid, groups, creds); err != nil {
		t.Fatalf("the job's credentials: %v", err)
	}
	// The user's own process on the host may not signal roam-init.
	kill := exec.Command("/bin/kill", "-0", strconv.Itoa(p.PID))
	kill.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: gid}}
	if out, err := kill.CombinedOutput(); err == nil {
		t.Fatalf("uid %d signalled the job's roam-init: %s", uid, out)
	}
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}
