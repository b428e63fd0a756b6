package ckpt

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"roam/internal/migrate"
	"roam/internal/procfs"
)

var record = flag.Bool("record", false, "write each kind's /proc view to ../migrate/testdata/views (for migrate's TestJudgeRecorded)")

// The pin rules on what /proc says of real processes: each kind of the
// kinds workload, started here (no CRIU, no cluster), read by ReadView
// and judged by migrate.Judge as a node with one shared directory, the
// job's own directory and a 64 MiB ghost limit judges it. With -record,
// the views are kept for the pure tests in internal/migrate.
func TestJudgeOnRealProcesses(t *testing.T) {
	if _, err := exec.LookPath("gcc"); err != nil {
		t.Skip("no gcc")
	}
	// Where a user's process reaches the program and writes its files.
	pub, err := os.MkdirTemp("", "roam-view-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(pub) })
	userDir := filepath.Join(pub, "user")
	if err := os.Chmod(pub, 0o755); err != nil || os.Mkdir(userDir, 0o700) != nil || os.Chown(userDir, 70001, 70001) != nil {
		t.Fatalf("%s: %v", pub, err)
	}
	bin := filepath.Join(pub, "kinds")
	if out, err := exec.Command("gcc", "-O2", "-Wall", "-pthread", "-o", bin, "../../workloads/kinds.c").CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v\n%s", err, out)
	}
	shared, jobDir := t.TempDir(), t.TempDir()
	rules := migrate.Rules{JobDir: jobDir, Shared: []string{shared, userDir}, GhostLimit: 64 << 20}
	cases := []struct {
		kind   string
		dir    string // where its files go
		ownIPC bool
		pin    string // a part of the pin, or "" when it moves (in userDir: as uid 70001)
	}{
		{"ghost", shared, false, ""},
		{"ghost-big", shared, false, "holds the deleted file " + shared + "/kinds-ghost-big-"},
		{"ghost", userDir, false, ""},
		{"memfd", shared, false, ""},
		{"shmanon", shared, false, ""},
		{"devzero", shared, false, ""},
		{"flock", jobDir, false, ""},
		{"posixlock", jobDir, false, ""},
		{"ofdlock", jobDir, false, ""},
		{"lease", jobDir, false, ""},
		{"flock-shared", shared, false, "holds a FLOCK lock on " + shared + "/kinds-flock-shared-"},
		{"fifo", jobDir, false, ""},
		{"fifo-shared", shared, false, "holds the named FIFO " + shared + "/kinds-fifo-shared-"},
		{"sysvshm", shared, false, "attaches the SysV shared memory segment with key 0x524f414d of the node's IPC namespace"},
		{"sysvshm", shared, true, ""},
		{"sysvsem", shared, true, ""},
		{"mqueue", shared, true, "its IPC namespace holds the POSIX message queue /roam-kinds-"},
		{"mqueue-unlinked", shared, true, "holds the POSIX message queue /roam-kinds-"},
		{"stopped", shared, false, ""},
		{"setuid", shared, false, ""}, // the pin rules pass it; the credentials check refuses it
		{"timerfd", shared, false, ""},
		{"posixtimer", shared, false, ""},
		{"itimer", shared, false, ""},
		{"procself", shared, false, ""},
		{"eventfd", shared, false, ""},
		{"signalfd", shared, false, ""},
		{"epoll", shared, false, ""},
		{"socketpair", shared, false, ""},
		{"pipe", shared, false, ""},
		{"threads", shared, false, ""},
		{"process", shared, false, ""},
		{"sleep", shared, false, ""},
		{"inotify-removed", shared, false, ""},
		{"removed-cwd", shared, false, "works in the removed directory " + shared + "/kinds-removed-cwd-"},
	}
	for _, tc := range cases {
		name := tc.kind
		if tc.ownIPC {
			name += "-ownipc"
		}
		user := tc.dir == userDir
		if user {
			name += "-user"
		}
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(bin, tc.kind, tc.dir)
			cmd.Dir = shared
			if tc.ownIPC {
				cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWIPC}
			}
			if user {
				cmd.Dir = userDir
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 70001, Gid: 70001, Groups: []uint32{70002}}}
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				_ = cmd.Process.Signal(syscall.SIGTERM)
				_ = cmd.Wait()
			})
			line, err := bufio.NewReader(out).ReadString('\n')
			if line != "ready\n" {
				t.Fatalf("kinds %s: %q, %v", tc.kind, line, err)
			}
			v := ReadView(cmd.Process.Pid)
			if v.OwnIPC != tc.ownIPC {
				t.Fatalf("OwnIPC %v, want %v", v.OwnIPC, tc.ownIPC)
			}
			got := migrate.Judge(v, rules)
			if (tc.pin == "") != (got.Pin == "") || !strings.Contains(got.Pin, tc.pin) {
				t.Fatalf("pin %q, want %q", got.Pin, tc.pin)
			}
			switch tc.kind {
			case "stopped":
				if len(got.Stopped) != 1 || got.Stopped[0] == cmd.Process.Pid {
					t.Fatalf("stopped %v: want the child only", got.Stopped)
				}
			case "mqueue":
				if want := fmt.Sprintf("/roam-kinds-%d", cmd.Process.Pid); len(v.MQueues) != 1 || v.MQueues[0] != want {
					t.Fatalf("queues %q, want %s", v.MQueues, want)
				}
				// The thread that listed them joined the job's IPC
				// namespace; it must end, not keep the namespace.
				its, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/ipc", cmd.Process.Pid))
				deadline := time.Now().Add(10 * time.Second)
				for in := threadsIn(its); in > 0; in = threadsIn(its) {
					if time.Now().After(deadline) {
						t.Fatalf("%d threads of this process are still in the job's IPC namespace", in)
					}
					time.Sleep(10 * time.Millisecond)
				}
			case "setuid":
				creds, err := procfs.TreeCreds(cmd.Process.Pid)
				if err != nil {
					t.Fatal(err)
				}
				if err := migrate.CheckCreds(0, 0, nil, creds); err == nil || !strings.Contains(err.Error(), "runs as uids [65534 65534 65534 65534]") {
					t.Fatalf("credentials check: %v", err)
				}
			case "ghost":
				if got.Ghosts < 4096 {
					t.Fatalf("ghosts %d bytes, want the 4096 written", got.Ghosts)
				}
			}
			if tc.pin == "" {
				checkKeys(t, cmd.Process.Pid, tc.kind, tc.dir)
			}
			if !*record {
				return
			}
			// What the pure tests judge again, with the three directories
			// and the program at fixed paths.
			b, err := json.MarshalIndent(v, "", "\t")
			if err != nil {
				t.Fatal(err)
			}
			s := strings.NewReplacer(shared, "/shared", userDir, "/shared/user", jobDir, "/job", bin, "/usr/local/bin/kinds").Replace(string(b))
			if err := os.WriteFile(filepath.Join("..", "migrate", "testdata", "views", name+".json"), []byte(s), 0o644); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// threadsIn counts the threads of this process in the namespace ns.
func threadsIn(ns string) int {
	n := 0
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		if l, _ := os.Readlink("/proc/self/task/" + t.Name() + "/ns/ipc"); l == ns {
			n++
		}
	}
	return n
}

// A timerfd's fdinfo as the kernel writes it, and which timers CRIU's
// restore left disarmed (a periodic one that had fired unread).
func TestParseTimerfd(t *testing.T) {
	info := func(value, ticks, flags string) string {
		return "pos:\t0\nflags:\t02004002\nmnt_id:\t17\nino:\t1038\nclockid: 1\nticks: " + ticks +
			"\nsettime flags: " + flags + "\nit_value: " + value + "\nit_interval: (0, 10000000)\n"
	}
	cases := []struct {
		info     string
		ok, dead bool
	}{
		{info("(0, 0)", "3", "00"), true, true},
		{info("(0, 4000000)", "0", "00"), true, false}, // armed
		{info("(0, 0)", "0", "00"), true, false},       // disarmed by its program: no ticks
		{info("(0, 0)", "3", "01"), true, false},       // absolute: CRIU sets it from the clock
		{info("(0, x)", "3", "00"), false, false},
		{info("(0, 1000000000)", "3", "00"), false, false},
		{"pos:\t0\nticks: 1\n", false, false},
	}
	for _, tc := range cases {
		tf, ok := ParseTimerfd(tc.info)
		if ok != tc.ok || (ok && tf.Disarmed() != tc.dead) {
			t.Errorf("%q: %+v, %v; want ok %v, disarmed %v", tc.info, tf, ok, tc.ok, tc.dead)
		}
	}
}

// A descriptor whose path reads differently before and after its stat:
// a running task's may have closed it and opened another file (it is
// left out, as an ended one's); a still task's was renamed by someone
// else, and it cannot be examined (StatErr), so it pins the job rather
// than hiding from the checks.
func TestEntryOfALinkThatChanges(t *testing.T) {
	f, err := os.CreateTemp(t.TempDir(), "f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	link := fmt.Sprintf("/proc/self/fd/%d", f.Fd())
	if e := entry(link, "", true); e.StatErr != "" || e.Ino == 0 || e.Link != f.Name() {
		t.Fatalf("an unchanged link: %+v", e)
	}
	calls := 0
	readlink = func(p string) (string, error) {
		calls++
		if calls%2 == 0 {
			return "/elsewhere/f", nil
		}
		return os.Readlink(p)
	}
	t.Cleanup(func() { readlink = os.Readlink })
	if e := entry(link, "", false); e.Link != "" {
		t.Fatalf("a running task's changed link: %+v, want it left out", e)
	}
	if e := entry(link, "", true); e.StatErr == "" || !strings.Contains(e.StatErr, "/elsewhere/f") {
		t.Fatalf("a still task's changed link: %+v, want it unexaminable", e)
	}
}

// checkKeys checks what the dump would declare external of the process
// pid (a kind of the kinds workload, its files in dir), and what Inspect
// lists: each regular file once, by CRIU's key, with the mount its
// descriptor or mapping is on; the program among them; no memfd, SysV or
// shared anonymous memory, nor a file of its own /proc; a deleted file's
// content written into the images by declare; and every regular file the
// verdict lists given its key.
func checkKeys(t *testing.T, pid int, kind, dir string) {
	t.Helper()
	ext, err := externals(pid, true)
	if err != nil {
		t.Fatalf("externals: %v", err)
	}
	exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	byPath := map[string]migrate.External{}
	for _, e := range ext {
		if _, ok := byPath[e.Path]; ok && !e.Deleted {
			t.Fatalf("%s listed twice: %+v", e.Path, ext)
		}
		byPath[e.Path] = e.External
		if strings.HasPrefix(e.Path, "/memfd:") || strings.HasPrefix(e.Path, "/SYSV") || strings.HasPrefix(e.Path, "/proc/") || strings.HasPrefix(e.Path, "/dev/zero") {
			t.Fatalf("%s is CRIU's to carry, declared external", e.Path)
		}
	}
	if _, ok := byPath[exe]; !ok {
		t.Fatalf("the program %s is not among %+v", exe, ext)
	}
	// The key of a descriptor is the mount its fdinfo names.
	ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, e := range ents {
		l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
		var st syscall.Stat_t
		if syscall.Stat(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()), &st) != nil || st.Mode&syscall.S_IFMT != syscall.S_IFREG || !strings.HasPrefix(l, dir) {
			continue
		}
		info, _ := os.ReadFile(fmt.Sprintf("/proc/%d/fdinfo/%s", pid, e.Name()))
		var mnt int
		for _, line := range strings.Split(string(info), "\n") {
			if v, ok := strings.CutPrefix(line, "mnt_id:"); ok {
				fmt.Sscan(v, &mnt)
			}
		}
		p := strings.TrimSuffix(l, " (deleted)")
		if got := byPath[p]; got.Key != migrate.ExtKey(mnt, st.Ino) || got.Deleted != (st.Nlink == 0) {
			t.Fatalf("descriptor %s of %s: %+v, want key %s", e.Name(), l, got, migrate.ExtKey(mnt, st.Ino))
		}
	}
	images := t.TempDir()
	keys, err := declare(pid, images, 64<<20)
	if err != nil || len(keys) != len(ext) {
		t.Fatalf("declare: %v, %d keys of %d", err, len(keys), len(ext))
	}
	saved, _ := filepath.Glob(filepath.Join(images, "roam-ghost-*"))
	if want := map[bool]int{true: 1, false: 0}[kind == "ghost"]; len(saved) != want {
		t.Fatalf("deleted files saved: %v", saved)
	}
	if kind == "ghost" {
		if b, err := os.ReadFile(saved[0]); err != nil || len(b) != 4096 {
			t.Fatalf("the deleted file saved: %d bytes, %v", len(b), err)
		}
		if _, err := declare(pid, t.TempDir(), 100); err == nil || !strings.Contains(err.Error(), "more than 100 bytes") {
			t.Fatalf("declare past the limit: %v", err)
		}
	}
	// Inspect's keys, from the view it read, are the dump's.
	fromView, err := viewExternals(readView(pid, true), true)
	if err != nil || len(fromView) != len(ext) {
		t.Fatalf("from the view: %+v %v; the dump's %+v", fromView, err, ext)
	}
	for i := range ext {
		if fromView[i] != ext[i].External {
			t.Fatalf("from the view: %+v; the dump's %+v", fromView[i], ext[i].External)
		}
	}
	h := &Host{Shared: []string{dir}, GhostLimit: 64 << 20}
	v := h.Inspect(pid, nil, false)
	for _, f := range v.Files {
		if (f.Access != "") != (f.Key != "") {
			t.Fatalf("verdict's %+v: a regular file without a key, or a directory with one", f)
		}
	}
}
