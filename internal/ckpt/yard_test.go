package ckpt

import (
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"roam/internal/cgroup"
	"roam/internal/procfs"
)

// CRIU's names of the hierarchies a process is in, each at the mount of
// its root: this machine's layout (v1 controllers each alone, a named
// systemd hierarchy, cgroup2 without controllers), a systemd host's
// (cpu,cpuacct together) and a cgroup2-only host. A mount of a group
// below a hierarchy's root, and a name that would leave the yard, are
// left out.
func TestYardNames(t *testing.T) {
	const mi1 = `31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
30 23 0:29 / /run/roam/cgyard/cpu rw,relatime - cgroup cgroup rw,cpu
32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
35 31 0:32 /sub /srv/memsub rw,relatime - cgroup cgroup rw,memory
36 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
50 31 0:40 / /sys/fs/cgroup/net_cls rw,relatime - cgroup cgroup rw,net_cls`
	const cg1 = "9:name=systemd:/\n4:memory:/process_api/x\n2:cpuacct:/\n1:cpu:/\n0::/\n"
	want := map[string]string{"cpu": "/sys/fs/cgroup/cpu", "cpuacct": "/sys/fs/cgroup/cpuacct", "memory": "/sys/fs/cgroup/memory",
		"systemd": "/sys/fs/cgroup/systemd", "unified": "/sys/fs/cgroup/unified"}
	if got, missing := yardNames(cg1, mi1, "/run/roam/cgyard/"); !maps.Equal(got, want) || missing != nil {
		t.Fatalf("this machine: %v (missing %q), want %v", got, missing, want)
	}
	// A hierarchy with no mount of its root: the yard would lack it, and
	// CRIU's dump fails on a hierarchy its yard lacks.
	if got, missing := yardNames(cg1+"7:blkio:/\n", mi1, "/run/roam/cgyard"); !slices.Equal(missing, []string{"blkio"}) || len(got) != len(want) {
		t.Fatalf("no blkio mount: %v, missing %q", got, missing)
	}
	const mi2 = `25 24 0:22 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
26 24 0:23 / /sys/fs/cgroup/name\040x rw - cgroup cgroup rw,name=x/y`
	const cg2 = "3:cpu,cpuacct:/user.slice\n2:name=x/y:/\n"
	if got, missing := yardNames(cg2, mi2, "/y"); !maps.Equal(got, map[string]string{"cpu,cpuacct": "/sys/fs/cgroup/cpu,cpuacct"}) || !slices.Equal(missing, []string{"name=x/y"}) {
		t.Fatalf("combined cpu,cpuacct: %v, missing %q", got, missing)
	}
	if got, missing := yardNames("3:cpu,name=z:/\n", "25 24 0:22 / /c rw - cgroup cgroup rw,cpu,name=z\n", "/y"); len(got) != 0 || len(missing) != 1 {
		t.Fatalf("named with controllers: %v, missing %q", got, missing)
	}
	if got, missing := yardNames("0::/user.slice\n", "29 24 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n", "/y"); !maps.Equal(got, map[string]string{"unified": "/sys/fs/cgroup"}) || missing != nil {
		t.Fatalf("cgroup2 only: %v, missing %q", got, missing)
	}
	if got, missing := yardNames("", "", "/y"); len(got) != 0 || missing != nil {
		t.Fatalf("nothing: %v %q", got, missing)
	}
}

// EnsureYard binds each hierarchy's root into the yard, made again (not
// stacked) by a second call; and CRIU, given the yard, opens the
// hierarchies there and mounts none: a real dump and restore of a
// process, whose restore.log says so.
func TestEnsureYard(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: it mounts")
	}
	dir := filepath.Join(t.TempDir(), "yard")
	t.Cleanup(func() {
		mi, _ := os.ReadFile("/proc/self/mountinfo")
		for _, p := range mountsBelow(string(mi), dir) {
			unix.Unmount(p, unix.MNT_DETACH)
		}
	})
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	cg, _ := os.ReadFile("/proc/self/cgroup")
	names, missing := yardNames(string(cg), string(mi), dir)
	if len(names) == 0 || len(missing) > 0 {
		t.Skipf("no cgroup hierarchy mounted, or some without their root (%q)", missing)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	for i := range 2 {
		got, err := EnsureYard(dir)
		if err != nil || got != dir {
			t.Fatalf("EnsureYard: %q, %v", got, err)
		}
		if i == 0 {
			// What CRIU or an earlier agent may leave: a directory, and
			// a mount in it.
			os.Mkdir(filepath.Join(dir, "stray"), 0o700)
			os.Mkdir(filepath.Join(dir, "stray2"), 0o700)
			if err := unix.Mount("x", filepath.Join(dir, "stray2"), "tmpfs", 0, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "stray")); err == nil {
		t.Fatal("a directory left in the yard stays")
	}
	mi, _ = os.ReadFile("/proc/self/mountinfo")
	if n := len(mountsBelow(string(mi), dir)); n != len(names) {
		t.Fatalf("%d mounts in the yard after two calls, want %d (%v)", n, len(names), names)
	}
	if !isTmpfsMount(string(mi), dir) || strings.Count(string(mi), " "+dir+" ") != 1 {
		t.Fatalf("the yard is not one tmpfs of its own")
	}
	for name, src := range names {
		var a, b unix.Stat_t
		if unix.Stat(src, &a) != nil || unix.Stat(filepath.Join(dir, name), &b) != nil || a.Dev != b.Dev || a.Ino != b.Ino {
			t.Fatalf("%s in the yard is not %s", name, src)
		}
	}
	if !UsableYard(dir) || UsableYard(t.TempDir()) {
		t.Fatal("UsableYard")
	}

	criuPath := DefaultPath()
	if _, err := os.Stat(criuPath); err != nil {
		t.Skip("no CRIU:", err)
	}
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	// In a group of its own, not CRIU's, as a job is: the restore moves
	// the copy into it.
	l, err := cgroup.Detect()
	if err != nil {
		t.Skip(err)
	}
	rel := fmt.Sprintf("roam-yardtest-%d", os.Getpid())
	if err := l.Create(rel); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Remove(rel) })
	if err := l.AddProc(rel, pid); err != nil {
		t.Fatal(err)
	}
	images := t.TempDir()
	mounts, err := Mounts(pid)
	if err != nil {
		t.Fatal(err)
	}
	c := CRIU{Path: criuPath, ExecMu: &sync.Mutex{}, Yard: dir}
	if _, err := c.Dump(DumpOpts{PID: pid, Dir: images, Mounts: mounts}); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	mm := map[string]string{}
	for _, m := range mounts {
		mm[m] = m
	}
	copyPID, _, err := c.Restore(RestoreOpts{Dir: images, Mounts: mm})
	if err != nil {
		t.Fatal(err)
	}
	st, _ := procfs.ReadStat(copyPID)
	t.Cleanup(func() { // before the group's removal (cleanups run last first)
		syscall.Kill(copyPID, syscall.SIGKILL)
		for end := time.Now().Add(10 * time.Second); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
			if now, err := procfs.ReadStat(copyPID); err != nil || now.StartTime != st.StartTime || now.State == 'Z' {
				return
			}
		}
	})
	log, err := os.ReadFile(filepath.Join(images, "restore.log"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "Opening "+dir+" as cg yard") {
		t.Fatalf("CRIU did not take the yard %s; restore.log:\n%s", dir, log)
	}
	if strings.Contains(string(log), "Making controller dir") {
		t.Fatal("CRIU mounted a hierarchy although the yard holds them all")
	}
}
