package job

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
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
	l := userNSLauncher(t)
	const uid, gid = 70001, 70001
	groups := []uint32{70001, 1001, 170002}
	p, err := l.Start(Spec{ID: "1.1", UID: uid, GID: gid, Groups: groups, Cwd: "/",
		Argv: []string{"/bin/sh", "-c", "id -u; id -g; id -G; cat /proc/self/uid_map; echo up; exec sleep 60"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Kill(p.PID, p.StartTix, 5*time.Second); _ = p.Wait() })
	out := waitUp(p)
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

// buildInit builds roam-init for a test, with musl as make does, in a
// directory of its own it returns too (not under /tmp, which the job's own
// /tmp hides from roam-init's second exec).
func buildInit(t *testing.T, prefix string) (dir, init string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("needs root (namespaces, another uid)")
	}
	dir, err := os.MkdirTemp("/var/lib", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	init = filepath.Join(dir, "roam-init")
	if out, err := exec.Command("musl-gcc", "-O2", "-static", "-o", init, "../../cinit/roam-init.c").CombinedOutput(); err != nil {
		t.Fatalf("build roam-init: %v\n%s", err, out)
	}
	return dir, init
}

// waitUp is what a job printed by the time it printed "up" (or 10 s).
func waitUp(p *Proc) string {
	var out string
	for end := time.Now().Add(10 * time.Second); !strings.Contains(out, "up\n") && time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile(filepath.Join(p.Dir, "stdout"))
		out = string(b)
	}
	return out
}

// userNSLauncher is a launcher of users' jobs in user namespaces of their
// own, with a roam-init built for the test.
func userNSLauncher(t *testing.T) Launcher {
	t.Helper()
	dir, init := buildInit(t, "roam-userns-test-")
	if err := UserNSAllowed(init, nil); err != nil {
		t.Fatalf("this host allows user namespaces (the tests need it): %v", err)
	}
	return Launcher{Init: init, SpoolRoot: filepath.Join(dir, "spool"), ExecMu: &sync.Mutex{}, UserNS: true}
}

// A user in more than 256 groups (the kernel allows 65,536, and so do
// the agent's socket and a migration's header) keeps every one of them in
// the job: roam-init used to cut the list at 256, silently.
func TestJobKeepsAllItsGroups(t *testing.T) {
	l := userNSLauncher(t)
	const uid, gid = 70001, 70001
	var groups []uint32
	for g := uint32(100000); len(groups) < 1000; g += 7 {
		groups = append(groups, g)
	}
	p, err := l.Start(Spec{ID: "1.1", UID: uid, GID: gid, Groups: groups, Cwd: "/",
		Argv: []string{"/bin/sh", "-c", "grep ^Groups: /proc/self/status; echo up"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Kill(p.PID, p.StartTix, 5*time.Second); _ = p.Wait() })
	out := waitUp(p)
	got := strings.Fields(strings.TrimPrefix(strings.TrimSuffix(out, "up\n"), "Groups:"))
	want := make([]string, len(groups))
	for i, g := range groups {
		want[i] = strconv.Itoa(int(g))
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the job is in %d groups, want the %d given (stdout %.200q, stderr %s)", len(got), len(want), out, readFile(filepath.Join(p.Dir, "stderr")))
	}
}

// roam-init runs as root with no environment: the user's is the
// program's alone, read by no C library's start-up as root. Both ways a
// job starts: in a user namespace of its own (roam-init again after
// -U) and without.
func TestRoamInitHasNoEnvironment(t *testing.T) {
	l := userNSLauncher(t)
	for _, userNS := range []bool{true, false} {
		l.UserNS = userNS
		env := []string{"PATH=/usr/bin:/bin", "ROAM_TEST_VAR=x y", "GLIBC_TUNABLES=glibc.malloc.check=3"}
		p, err := l.Start(Spec{ID: fmt.Sprintf("1.%v", userNS), UID: 70001, GID: 70001, Cwd: "/", Env: env,
			Argv: []string{"/bin/sh", "-c", "echo \"$ROAM_TEST_VAR\"; ls /proc/self/fd | wc -l; echo up; exec sleep 60"}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { l.Kill(p.PID, p.StartTix, 5*time.Second); _ = p.Wait() })
		out := waitUp(p)
		// sh's descriptors: 0, 1, 2, and ls's own of the directory: no
		// environment file, no status.
		if want := "x y\n4\nup\n"; out != want {
			t.Fatalf("user namespace %v: the job printed %q, want %q (stderr: %s)", userNS, out, want, readFile(filepath.Join(p.Dir, "stderr")))
		}
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", p.PID)); err != nil || len(b) != 0 {
			t.Fatalf("user namespace %v: roam-init's environment is %q (%v), want none", userNS, b, err)
		}
	}
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// A job copies the node's template mount namespace (roam-init -M) and
// ends up with the mounts a job that dropped them itself has: the same
// mount points, of the same kinds, for a user's job and root's. The
// template is made once, and again once the agent's mount table is not
// the one it was made from.
func TestJobMountsFromTheTemplate(t *testing.T) {
	dir, init := buildInit(t, "roam-template-test-")
	tpl := &Template{}
	mounts := func(l Launcher, id string, uid uint32) string {
		p, err := l.Start(Spec{ID: id, UID: uid, GID: uid, Cwd: "/", Argv: []string{"/bin/cat", "/proc/self/mountinfo"}})
		if err != nil {
			t.Fatal(err)
		}
		_ = p.Wait()
		if st := readFile(filepath.Join(p.Dir, "status")); strings.TrimSpace(st) != "0" {
			t.Fatalf("job %s: status %q, stderr %s", id, st, readFile(filepath.Join(p.Dir, "stderr")))
		}
		var kinds []string
		for _, line := range strings.Split(strings.TrimSpace(readFile(filepath.Join(p.Dir, "stdout"))), "\n") {
			f := strings.Fields(line)
			_, after, _ := strings.Cut(line, " - ")
			kinds = append(kinds, f[4]+" "+strings.Fields(after)[0])
		}
		return strings.Join(kinds, "\n")
	}
	for _, uid := range []uint32{70001, 0} {
		l := Launcher{Init: init, SpoolRoot: filepath.Join(dir, "spool"), ExecMu: &sync.Mutex{}, UserNS: true}
		own := mounts(l, fmt.Sprintf("1.%d", uid), uid)
		l.Template = tpl
		if got := mounts(l, fmt.Sprintf("2.%d", uid), uid); got != own || tpl.ns == nil {
			t.Fatalf("uid %d: a job from the template (%v) mounts\n%s\nwhere one that drops its mounts itself has\n%s", uid, tpl.ns != nil, got, own)
		}
	}
	was := tpl.ns
	mounts(Launcher{Init: init, SpoolRoot: filepath.Join(dir, "spool"), ExecMu: &sync.Mutex{}, Template: tpl}, "3.1", 0)
	if tpl.ns != was {
		t.Fatal("the template was made again for the same mount table")
	}
	tpl.from = []byte("another mount table")
	tpl.table.Close()
	tpl.table = nil // as if poll(2) said the table changed
	mounts(Launcher{Init: init, SpoolRoot: filepath.Join(dir, "spool"), ExecMu: &sync.Mutex{}, Template: tpl}, "3.2", 0)
	if tpl.ns == was || tpl.ns == nil {
		t.Fatal("the template was not made again for another mount table")
	}
}

// Check looks a job's working directory and program up as its user:
// inside a directory the user may not search, a path that exists and one
// that does not get the same answer, where root's lookup told them
// apart.
func TestCheckTellsAUserNothingOfRootsDirectories(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root (another uid)")
	}
	// root's, mode 0700; not under /tmp, which a job's is its own.
	dir, err := os.MkdirTemp("/run", "roam-check-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, d := range []string{"there", "bin"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "bin", "prog"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	check := func(cwd, prog string) error {
		return Check(Spec{UID: 70001, GID: 70001, Groups: []uint32{70001}, Cwd: cwd, Argv: []string{prog}})
	}
	for _, c := range []struct{ what, there, missing, prog1, prog2 string }{
		{"working directory", filepath.Join(dir, "there"), filepath.Join(dir, "missing"), "/bin/true", "/bin/true"},
		{"program", "/", "/", filepath.Join(dir, "bin", "prog"), filepath.Join(dir, "bin", "missing")},
	} {
		a, b := check(c.there, c.prog1), check(c.missing, c.prog2)
		kind := func(err error) error {
			for _, k := range []error{ErrNoCwd, ErrNoProgram, ErrNotExec} {
				if errors.Is(err, k) {
					return k
				}
			}
			return err
		}
		if a == nil || kind(a) != kind(b) {
			t.Errorf("%s under root's 0700 directory: %v for one that exists, %v for one that does not; want the same refusal", c.what, a, b)
		}
	}
	// Root's own job still finds them.
	if err := Check(Spec{Cwd: filepath.Join(dir, "there"), Argv: []string{filepath.Join(dir, "bin", "prog")}}); err != nil {
		t.Errorf("root's job: %v", err)
	}
}

// A working directory or a program in /tmp or /var/tmp is refused before
// anything starts, with why: the job's own are empty tmpfs, so roam-init
// found neither and the job died with no status. A name that only starts
// like them (/tmpx) is not theirs.
func TestCheckRefusesTheJobsOwnTmp(t *testing.T) {
	inTmp, err := os.MkdirTemp("/tmp", "roam-cwd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(inTmp) })
	elsewhere, err := os.MkdirTemp("/run", "roam-cwd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(elsewhere) })
	prog := filepath.Join(inTmp, "prog")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		cwd, prog, want string
	}{
		{inTmp, "/bin/true", "working directory " + inTmp + ": a job's /tmp is its own"},
		{elsewhere, prog, "program " + prog + ": a job's /tmp is its own"},
		{elsewhere, "/bin/true", ""},
	} {
		err := Check(Spec{Cwd: c.cwd, Argv: []string{c.prog}})
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("Check(cwd %s, program %s) = %v; want %q", c.cwd, c.prog, err, c.want)
		}
	}
	if d := inJobTmp("/tmpx/y"); d != "" {
		t.Errorf("/tmpx/y is in the job's %s; want in none", d)
	}
}

// A job roam-init could not set up ends with status 125, written by
// roam-init, and says why on its stderr. roam-init used to exit with no
// status, which the agent reads as killed (137). Here its working
// directory is a link into the node's /tmp: there for the agent's check,
// not in the job's own empty /tmp.
func TestRoamInitWritesTheStatusOfAFailedStart(t *testing.T) {
	l := userNSLauncher(t)
	target, err := os.MkdirTemp("/tmp", "roam-cwd-")
	if err != nil || os.Chmod(target, 0o755) != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(target) })
	link := "/run/roam-cwd-link-" + filepath.Base(target)
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(link) })
	for _, userNS := range []bool{true, false} {
		l.UserNS = userNS
		id := fmt.Sprintf("2.%v", userNS)
		p, err := l.Start(Spec{ID: id, UID: 70001, GID: 70001, Cwd: link, Argv: []string{"/bin/true"}})
		if err != nil {
			t.Fatal(err)
		}
		_ = p.Wait()
		code, ok := ReadStatus(p.Dir)
		if stderr := readFile(filepath.Join(p.Dir, "stderr")); !ok || code != 125 || !strings.Contains(stderr, "working directory "+link) {
			t.Fatalf("user namespace %v: status %d (written %v), stderr %q; want 125 and the working directory named", userNS, code, ok, stderr)
		}
	}
}
