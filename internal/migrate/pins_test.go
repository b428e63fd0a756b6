package migrate

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"roam/internal/errkind"
	"slices"
	"strings"
	"testing"
)

// testRules: a node whose shared directory is /shared, whose jobs' own
// directory is /job, with a 64 MiB ghost limit.
var testRules = Rules{JobDir: "/job", Shared: []string{"/shared"}, Members: map[string]bool{"10.0.0.2": true}, GhostLimit: 64 << 20}

// The rules on /proc as it was recorded for each kind of the kinds
// workload (internal/ckpt's TestJudgeOnRealProcesses -record): what moves,
// and what pins, with the kernel object named.
func TestJudgeRecorded(t *testing.T) {
	want := map[string]string{
		"ghost": "", "memfd": "", "shmanon": "", "devzero": "",
		"ghost-big":              "holds the deleted file /shared/kinds-ghost-big-",
		"ghost-user":             "",
		"flock":                  "",
		"posixlock":              "",
		"ofdlock":                "",
		"flock-shared":           "holds a FLOCK lock on /shared/kinds-flock-shared-",
		"fifo":                   "",
		"fifo-shared":            "holds the named FIFO /shared/kinds-fifo-shared-",
		"sysvshm":                "attaches the SysV shared memory segment with key 0x524f414d of the node's IPC namespace",
		"sysvshm-ownipc":         "",
		"sysvsem-ownipc":         "",
		"mqueue-ownipc":          "its IPC namespace holds the POSIX message queue /roam-kinds-",
		"mqueue-unlinked-ownipc": "holds the POSIX message queue /roam-kinds-",
		"stopped":                "",
		"timerfd":                "",
		"posixtimer":             "",
		"itimer":                 "",
		"eventfd":                "",
		"signalfd":               "",
		"epoll":                  "",
		"socketpair":             "",
		"pipe":                   "",
		"threads":                "",
		"process":                "",
		"sleep":                  "",
		"inotify-removed":        "",
		"removed-cwd":            "works in the removed directory /shared/kinds-removed-cwd-",
	}
	files, _ := filepath.Glob("testdata/views/*.json")
	if len(files) != len(want) {
		t.Fatalf("%d recorded views, want %d", len(files), len(want))
	}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var v View
		if err := json.Unmarshal(b, &v); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		w, ok := want[name]
		if !ok {
			t.Fatalf("%s: no verdict expected", name)
		}
		got := Judge(v, testRules)
		if (w == "") != (got.Pin == "") || !strings.Contains(got.Pin, w) {
			t.Errorf("%s: pin %q, want %q", name, got.Pin, w)
			continue
		}
		if got.Pin != "" {
			continue
		}
		// The program's binary and libraries are listed for the
		// destination, not needed to be the same files (outside /shared);
		// the working directory in /shared (a user's in /shared/user)
		// must be.
		wd := "/shared"
		if strings.HasSuffix(name, "-user") {
			wd = "/shared/user"
		}
		var cwd *OpenFile
		for i, f := range got.Files {
			if strings.HasPrefix(f.Path, "/job") {
				t.Errorf("%s: the job's own file %s is listed", name, f.Path)
			}
			if f.Path == wd {
				cwd = &got.Files[i]
			}
		}
		if cwd == nil || !cwd.Same || cwd.Ino == 0 {
			t.Errorf("%s: working directory %s listed as %+v", name, wd, cwd)
		}
		switch name {
		case "stopped":
			if len(got.Stopped) != 1 {
				t.Errorf("stopped: %v", got.Stopped)
			}
		case "ghost":
			if got.Ghosts != 4096 {
				t.Errorf("ghost: %d bytes of ghosts, want 4096", got.Ghosts)
			}
		default:
			if len(got.Stopped) != 0 {
				t.Errorf("%s: stopped %v", name, got.Stopped)
			}
		}
	}
	// The ghost limit is the node's: at 0, no deleted file moves.
	b, _ := os.ReadFile("testdata/views/ghost.json")
	var v View
	_ = json.Unmarshal(b, &v)
	r := testRules
	r.GhostLimit = 0
	if got := Judge(v, r); !strings.Contains(got.Pin, "deleted files of up to 0 bytes in all move with a job") {
		t.Errorf("ghost with limit 0: %q", got.Pin)
	}
}

// The rules no recorded kind reaches, on views made by hand as /proc
// shows them.
func TestJudgeRules(t *testing.T) {
	reg := func(link string) Entry { return Entry{Link: link, Mode: modeReg | 0o644, Nlink: 1, Ino: 7} }
	dir := func(link string) Entry { return Entry{Link: link, Mode: modeDir | 0o755, Nlink: 2, Ino: 8} }
	task := func(fds ...Entry) Task {
		return Task{PID: 40, Status: "State:\tS (sleeping)\nTracerPid:\t0\nUid:\t1000\t1000\t1000\t1000\n", Cwd: dir("/shared/u"), FDs: fds}
	}
	// Root's job.
	rootTask := func(fds ...Entry) Task {
		t := task(fds...)
		t.Status = "State:\tS (sleeping)\nTracerPid:\t0\nUid:\t0\t0\t0\t0\n"
		return t
	}
	ghost := func(link string, uid uint32, mode uint32, alloc int64) Entry {
		return Entry{Link: link + " (deleted)", Mode: modeReg | mode, Nlink: 0, Alloc: alloc, UID: uid}
	}
	sub := map[string]Entry{"/shared/sub": {Link: "/shared/sub", Mode: modeDir | 0o755, Nlink: 2, Ino: 99}}
	// The job's own /tmp and /var/tmp, tmpfs mounts of its own.
	tmpReg := func(link string) Entry { e := reg(link); e.FSType = TmpfsMagic; return e }
	tmpDir := func(link string) Entry { e := dir(link); e.FSType = TmpfsMagic; return e }
	tmpLocked := func(link string) Entry {
		e := tmpReg(link)
		e.Info = "pos:\t0\nflags:\t02\nlock:\t1: POSIX  ADVISORY  WRITE 45 00:2a:7 0 EOF\n"
		return e
	}
	tmpGhost := func(link string, uid uint32) Entry {
		e := ghost(link, uid, 0o600, 4096)
		e.FSType = TmpfsMagic
		return e
	}
	cases := []struct {
		name string
		v    View
		pin  string
	}{
		{"a file in /tmp", View{Tasks: []Task{task(reg("/tmp/scratch"))}}, "holds open /tmp/scratch, on this node's own filesystem (shared directories: /shared)"},
		{"a working directory in /var/tmp", View{Tasks: []Task{{PID: 1, Cwd: dir("/var/tmp/run")}}}, "works in /var/tmp/run, on this node's own filesystem"},
		{"a POSIX shared memory file is the node's", View{Tasks: []Task{task(reg("/dev/shm/x"))}}, "holds open /dev/shm/x, on this node's own filesystem"},
		{"a prefix is not a directory", View{Tasks: []Task{task(reg("/sharedx/f"))}}, "holds open /sharedx/f"},
		{"the system's files move", View{Tasks: []Task{task(reg("/usr/lib/locale/x"), reg("/etc/passwd"))}}, ""},
		{"a device", View{Tasks: []Task{task(Entry{Link: "/dev/ttyS0", Mode: modeChr, Nlink: 1})}}, "process 40 holds open the device /dev/ttyS0"},
		{"a harmless device", View{Tasks: []Task{task(Entry{Link: "/dev/null", Mode: modeChr, Nlink: 1})}}, ""},
		{"a live file named deleted", View{Tasks: []Task{task(reg("/shared/x (deleted)"))}}, ""},
		{"io_uring", View{Tasks: []Task{task(Entry{Link: "anon_inode:[io_uring]"})}}, "holds a descriptor of the kernel object anon_inode:[io_uring], which CRIU cannot dump"},
		{"a traced process", View{Tasks: []Task{{PID: 41, Status: "State:\tt (tracing stop)\nTracerPid:\t99\n"}}}, "process 41 is traced by process 99 (ptrace)"},
		{"a removed directory held open", View{Tasks: []Task{task(Entry{Link: "/shared/d (deleted)", Mode: modeDir, Nlink: 0})}}, "holds open the removed directory /shared/d"},
		{"a unix socket by path", View{Tasks: []Task{task(Entry{Link: "/shared/s", Mode: modeSock, Nlink: 1})}}, "holds the unix socket /shared/s"},
		{"a symbolic link held with O_PATH", View{Tasks: []Task{task(Entry{Link: "/shared/l", Mode: 0o120777, Nlink: 1})}}, "holds open /shared/l, a file of a kind roam does not move (type 0120000)"},
		{"a file of no kind the kernel makes, removed", View{Tasks: []Task{task(Entry{Link: "/shared/x", Mode: 0o50644})}}, "a file of a kind roam does not move (type 050000)"},
		{"a POSIX lock on a shared file", View{Tasks: []Task{task(Entry{Link: "/shared/db", Mode: modeReg, Nlink: 1, Info: "pos:\t0\nflags:\t02\nlock:\t1: POSIX  ADVISORY  WRITE 40 fd:01:7 0 EOF\n"})}},
			"holds a POSIX lock on /shared/db"},
		{"a shared writable mapping of a node's file", View{Tasks: []Task{{PID: 42, Maps: []MapEntry{{Mapping{Range: "1-2", Path: "/tmp/m", SharedWrite: true}, reg("/tmp/m")}}}}},
			"process 42 maps /tmp/m shared and writable, on this node's own filesystem"},
		{"a mapped device", View{Tasks: []Task{{PID: 43, Maps: []MapEntry{{Mapping{Range: "1-2", Path: "/dev/dri/card0"}, Entry{Link: "/dev/dri/card0", Mode: modeChr, Nlink: 1}}}}}},
			"process 43 maps /dev/dri/card0, which is not a regular file"},
		{"a deleted file of root's job moves", View{Tasks: []Task{rootTask(ghost("/shared/sub/t", 0, 0o600, 4096))}, Dirs: sub}, ""},
		{"a deleted file of a user's job moves", View{Tasks: []Task{task(ghost("/shared/sub/t", 1000, 0o600, 4096))}, Dirs: sub}, ""},
		{"a user's deleted file in root's job", View{Tasks: []Task{rootTask(ghost("/shared/sub/t", 1000, 0o600, 4096))}, Dirs: sub},
			"holds the deleted file /shared/sub/t of uid 1000, mode 600: only a file of the job's own user"},
		{"a deleted file in the job's own directory", View{Tasks: []Task{task(ghost("/job/t", 1000, 0o600, 4096))}}, ""},
		{"a sparse deleted file counts its size", View{Tasks: []Task{rootTask(Entry{Link: "/shared/sub/t (deleted)", Mode: modeReg | 0o600, Size: 80 << 20, Alloc: 4096})}, Dirs: sub},
			"holds the deleted file /shared/sub/t (83886080 bytes"},
		{"a memfd of a user's job moves", View{Tasks: []Task{task(ghost("/memfd:x", 1000, 0o600, 4096))}}, ""},
		{"a deleted file whose directory is gone", View{Tasks: []Task{rootTask(ghost("/shared/gone/t", 0, 0o600, 4096))}, Dirs: sub},
			"holds the deleted file /shared/gone/t, whose directory /shared/gone is gone or not a directory"},
		{"a deleted file of another user", View{Tasks: []Task{rootTask(ghost("/shared/sub/t", 1000, 0o644, 4096))}, Dirs: sub},
			"holds the deleted file /shared/sub/t of uid 1000, mode 644: only a file of the job's own user"},
		{"a deleted set-user-id file", View{Tasks: []Task{rootTask(ghost("/shared/sub/t", 0, 0o4755, 4096))}, Dirs: sub}, "mode 4755"},
		{"deleted files over the limit together", View{Tasks: []Task{rootTask(ghost("/shared/sub/a", 0, 0o600, 40<<20), ghost("/shared/sub/b", 0, 0o600, 40<<20))}, Dirs: sub},
			"holds the deleted file /shared/sub/b (41943040 bytes, with the others 83886080; deleted files of up to 67108864 bytes in all"},
		{"a file of its own /proc moves", View{Tasks: []Task{task(Entry{Link: "/proc/4/maps", Mode: modeReg | 0o444, Nlink: 1, FSType: ProcMagic})}}, ""},
		{"a file in /proc of another filesystem", View{Tasks: []Task{task(Entry{Link: "/proc/x", Mode: modeReg | 0o444, Nlink: 1, Ino: 5})}}, ""},
		{"a file that cannot be examined", View{Tasks: []Task{task(Entry{Link: "/shared/fuse/f", StatErr: "permission denied"})}},
			"process 40 holds open /shared/fuse/f, which cannot be examined: permission denied"},
		{"a working directory that cannot be examined", View{Tasks: []Task{{PID: 44, Cwd: Entry{Link: "/shared/fuse", StatErr: "permission denied"}}}},
			"process 44 works in /shared/fuse, which cannot be examined"},
		{"a file below the job's directory", View{Tasks: []Task{task(reg("/job/sub/f"))}}, "holds open /job/sub/f, below the job's own directory"},
		{"a FIFO below the job's directory", View{Tasks: []Task{task(Entry{Link: "/job/sub/p", Mode: modeFIFO, Nlink: 1})}}, "holds the named FIFO /job/sub/p"},
		{"the job's own /tmp: a file, a FIFO, a mapping, a lock, a working directory", View{Tasks: []Task{{PID: 45, Status: "Uid:\t1000\t1000\t1000\t1000\n",
			Cwd: tmpDir("/tmp/build"), FDs: []Entry{tmpReg("/tmp/ccA.s"), tmpReg("/var/tmp/x"), tmpLocked("/tmp/db"), {Link: "/tmp/GMfifo9", Mode: modeFIFO, Nlink: 1, FSType: TmpfsMagic}},
			Maps: []MapEntry{{Mapping{Range: "1-2", Path: "/tmp/m", SharedWrite: true}, tmpReg("/tmp/m")}}}}}, ""},
		{"a deleted file of root's job in its own /tmp, whose directory the node lacks", View{Tasks: []Task{rootTask(tmpGhost("/tmp/sub/t", 0))}}, ""},
		{"a deleted file of a user's job in its own /tmp", View{Tasks: []Task{task(tmpGhost("/tmp/t", 1000))}}, "holds the deleted file /tmp/t in its own /tmp: CRIU would make it again there as root"},
		{"a tmpfs that is not /tmp", View{Tasks: []Task{task(Entry{Link: "/dev/shm/x", Mode: modeReg | 0o644, Nlink: 1, FSType: TmpfsMagic})}}, "holds open /dev/shm/x, on this node's own filesystem"},
		{"a prefix of /tmp is not /tmp", View{Tasks: []Task{task(Entry{Link: "/tmpx/f", Mode: modeReg | 0o644, Nlink: 1, FSType: TmpfsMagic})}}, "holds open /tmpx/f, on this node's own filesystem"},
		{"a removed directory in its own /tmp", View{Tasks: []Task{task(Entry{Link: "/tmp/d (deleted)", Mode: modeDir, Nlink: 0, FSType: TmpfsMagic})}}, "holds open the removed directory /tmp/d"},
		{"a TCP connection out", View{Tasks: []Task{task(Entry{Link: "socket:[77]"})}, TCP: []TCPConn{{Inode: "77", Remote: "192.0.2.9:80"}}},
			"holds a TCP connection to 192.0.2.9:80 (outside the cluster)"},
		{"a TCP connection in the cluster", View{Tasks: []Task{task(Entry{Link: "socket:[77]"})}, TCP: []TCPConn{{Inode: "77", Remote: "10.0.0.2:22"}}},
			"(inside the cluster; its address would change)"},
		{"another namespace's connection", View{Tasks: []Task{task(Entry{Link: "socket:[77]"})}, TCP: []TCPConn{{Inode: "78", Remote: "192.0.2.9:80"}}}, ""},
	}
	for _, tc := range cases {
		got := Judge(tc.v, testRules)
		if (tc.pin == "") != (got.Pin == "") || !strings.Contains(got.Pin, tc.pin) {
			t.Errorf("%s: pin %q, want %q", tc.name, got.Pin, tc.pin)
		}
		if got.Pin != "" && got.Files != nil {
			t.Errorf("%s: pinned with files %v", tc.name, got.Files)
		}
	}
	// A frozen job may be traced by its dump's CRIU: not a pin then.
	traced := View{Tasks: []Task{{PID: 41, Status: "State:\tt (tracing stop)\nTracerPid:\t99\n"}}}
	frozen := testRules
	frozen.Frozen = true
	if got := Judge(traced, frozen); got.Pin != "" {
		t.Errorf("frozen and traced: %q", got.Pin)
	}
	// A deleted file is made again without a name in its directory, as
	// the owner, whichever directory is at that path: the directory is
	// not listed (WithKeys lists the file).
	got := Judge(View{Tasks: []Task{rootTask(ghost("/shared/sub/t", 0, 0o600, 4096))}, Dirs: sub}, testRules)
	if len(got.Files) != 1 || got.Files[0].Path != "/shared/u" || got.Ghosts != 4096 {
		t.Errorf("a ghost in /shared/sub: %+v", got)
	}
	// The files of the job's own /tmp are not listed for the destination,
	// nor is the directory of a deleted one: they move in the tmpfs.
	tmpJob := View{Tasks: []Task{{PID: 46, Status: "Uid:\t0\t0\t0\t0\n", Cwd: tmpDir("/tmp/b"), FDs: []Entry{tmpReg("/tmp/b/x.s"), tmpGhost("/var/tmp/g", 0), reg("/shared/in.c")}}}}
	if got := Judge(tmpJob, testRules); got.Pin != "" || len(got.Files) != 1 || got.Files[0].Path != "/shared/in.c" || got.Ghosts != 4096 {
		t.Errorf("a job working in its own /tmp: %+v; want only /shared/in.c listed, one ghost", got)
	}
	// A shared directory or the job's directory below /tmp (a test's, on a
	// host whose /tmp is a tmpfs) keeps its own rules.
	underTmp := Rules{JobDir: "/tmp/job", Shared: []string{"/tmp/nfs"}, GhostLimit: 64 << 20}
	for _, tc := range []struct {
		f    Entry
		pin  string
		list bool
	}{
		{tmpLocked("/tmp/nfs/db"), "holds a POSIX lock on /tmp/nfs/db", false},
		{tmpReg("/tmp/nfs/in.c"), "", true},
		{tmpReg("/tmp/job/sub/f"), "below the job's own directory", false},
	} {
		got := Judge(View{Tasks: []Task{{PID: 47, Cwd: tmpDir("/tmp/job"), FDs: []Entry{tc.f}}}}, underTmp)
		if !strings.Contains(got.Pin, tc.pin) || (tc.pin == "") != (got.Pin == "") || tc.list != slices.ContainsFunc(got.Files, func(f OpenFile) bool { return f.Path == tc.f.Link }) {
			t.Errorf("%s under a tmpfs /tmp: %+v, want pin %q, listed %v", tc.f.Link, got, tc.pin, tc.list)
		}
	}
	// A file of the job's own /proc is not listed for the destination:
	// CRIU opens it again in the restored job's /proc.
	if got := Judge(View{Tasks: []Task{task(Entry{Link: "/proc/4/maps", Mode: modeReg | 0o444, Nlink: 1, FSType: ProcMagic})}}, testRules); got.Pin != "" || len(got.Files) != 1 || got.Files[0].Path != "/shared/u" {
		t.Errorf("/proc/4/maps: %+v; want only the working directory listed", got)
	}
	// One file reached three ways is listed once, with the widest access.
	v := View{Tasks: []Task{task(Entry{Link: "/shared/d", Mode: modeReg, Nlink: 1, Ino: 9, Info: "flags:\t0100000\n"}, Entry{Link: "/shared/d", Mode: modeReg, Nlink: 1, Ino: 9, Info: "flags:\t01\n"})}}
	got = Judge(v, testRules)
	if len(got.Files) != 2 || got.Files[1] != (OpenFile{Path: "/shared/d", Access: "rw", Ino: 9, Same: true}) {
		t.Errorf("files %+v", got.Files)
	}
}

// A pin's reason travels as the error itself: through wrapping it stays
// the reason alone, without the job's id, and an ErrPinned of another
// kind (a destination's answer) gives its whole message.
func TestPinReason(t *testing.T) {
	p := &Pinned{Job: "n1.4", Reason: "holds open the device /dev/ttyS0"}
	if p.Error() != "n1.4: holds open the device /dev/ttyS0" || !errors.Is(p, ErrPinned) {
		t.Fatalf("%q, pinned %v", p, errors.Is(p, ErrPinned))
	}
	for _, tc := range []struct {
		err    error
		reason string
		pinned bool
	}{
		{p, p.Reason, true},
		{fmt.Errorf("migration of n1.4: %w", p), p.Reason, true},
		{errkind.New(ErrPinned, "open file /s/f on node n2 is not the file the job has open"), "open file /s/f on node n2 is not the file the job has open", true},
		{errors.New("n1.4: holds open the device /dev/ttyS0"), "", false},
		{nil, "", false},
	} {
		if reason, pinned := PinReason(tc.err); reason != tc.reason || pinned != tc.pinned {
			t.Errorf("%v: %q %v, want %q %v", tc.err, reason, pinned, tc.reason, tc.pinned)
		}
	}
}
