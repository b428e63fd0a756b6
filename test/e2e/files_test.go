package e2e

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"roam/internal/emu"
)

// The attacks on root's CRIU opening a user's paths (issue 42), won in the
// race the destination's check leaves: the user swaps a path after the
// destination's checks, as CRIU starts to restore, before it opens the
// job's files (migrateSwapping). Regular files, mapped ones and deleted
// ones go to CRIU as the descriptors the check opened, or made, as the
// job's owner: nothing swapped reaches the restored job, and CRIU opens,
// creates and links nothing at the user's paths. Subnets 198.18.63.0/24
// and 198.18.64.0/24.

// job is the start of the tests' Python jobs.
const job = "import os, sys, time, mmap\n"

// ghostLeft matches the files CRIU's ghost files and link remaps leave when
// its clean-up does not run.
var ghostLeft = regexp.MustCompile(`\.cr\.[0-9]+\.ghost$|\.cr_link$`)

// crLeftovers lists the ghost files and link remaps of CRIU's under dirs.
func crLeftovers(dirs ...string) []string {
	var out []string
	for _, d := range dirs {
		_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err == nil && ghostLeft.MatchString(e.Name()) {
				out = append(out, p)
			}
			return nil
		})
	}
	return out
}

// migrateSwapping migrates job id from node from to node to; swap runs
// as soon as CRIU starts to restore on to (its log appears), after the
// destination's checks of the job's files, the late one included, and
// before CRIU opens any of them. It returns the CLI's output and error,
// or fails the test when the migration has not ended within limit (CRIU
// blocked).
func (c *cluster) migrateSwapping(id, from, to string, limit time.Duration, swap func()) (string, error) {
	c.t.Helper()
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	t0 := time.Now()
	go func() {
		out, err := c.run("--node", from, "migrate", id, to)
		done <- result{out, err}
	}()
	logs := filepath.Join(emu.ImageDir(c.name), "n"+to, "in-*", "restore.log")
	for {
		if m, _ := filepath.Glob(logs); len(m) > 0 {
			break
		}
		select {
		case r := <-done:
			c.t.Fatalf("migrate %s→%s ended before CRIU restored: %v %s", from, to, r.err, r.out)
		case <-time.After(time.Millisecond):
		}
		if time.Since(t0) > limit {
			c.t.Fatalf("migrate %s→%s: no restore within %v", from, to, limit)
		}
	}
	swap()
	select {
	case r := <-done:
		c.t.Logf("migrate %s→%s: %v after %v: %s", from, to, r.err, time.Since(t0).Round(time.Millisecond), strings.TrimSpace(r.out))
		return r.out, r.err
	case <-time.After(limit):
		c.t.Fatalf("migrate %s→%s has not ended after %v: CRIU blocked", from, to, limit)
		return "", nil
	}
}

// aside renames path to path+".real" and puts what make makes in its
// place, the job user's, as another job of that user would.
func aside(t *testing.T, path string, make func(string) error) {
	t.Helper()
	if err := os.Rename(path, path+".real"); err != nil {
		t.Fatal(err)
	}
	if err := make(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(path, int(jobUser.uid), int(jobUser.gid)); err != nil {
		t.Fatal(err)
	}
}

// mend puts path+".real" back at path.
func mend(t *testing.T, path string) {
	t.Helper()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".real", path); err != nil {
		t.Fatal(err)
	}
}

// symlinkTo makes a symlink to target.
func symlinkTo(target string) func(string) error {
	return func(p string) error { return os.Symlink(target, p) }
}

// userDirs makes base/NAME for each name, the job user's, mode 0755.
func userDirs(t *testing.T, base string, names ...string) {
	t.Helper()
	for _, n := range names {
		d := filepath.Join(base, n)
		if err := os.Mkdir(d, 0o755); err != nil || os.Chown(d, int(jobUser.uid), int(jobUser.gid)) != nil {
			t.Fatalf("%s: %v", d, err)
		}
	}
}

// A user's job holds a deleted file of its own in u/g and works in ww/w,
// ww being a directory anyone may write, without the sticky bit (as some
// sites' scratch directories are). Once the destination has checked the
// job's files, the user puts a symlink to a directory of root's (the
// canary) at u/g: CRIU, which made a deleted file again as root by its
// full path, following symlinks, and left it there when it was killed,
// would have made the user's file in root's directory. The job moves with
// its deleted file, made again without a name in the directory the check
// opened, as the user; the canary stays empty. Then the working directory
// is swapped for a symlink to the canary too, and then, by a rename, for
// a directory of root's, mode 0700, that sat in ww: CRIU, which opened a
// working directory by path as root, following symlinks, opened each for
// the restored job (and roam refused the tree afterwards). It now opens a
// directory as the task, without symlinks: each restore is refused
// before anything is opened (an inotify watch on both directories counts
// their opens: none), its tasks killed, the job runs on where it was, and
// no ghost file, link remap or restored task of CRIU's is left anywhere.
func TestFilesGhostDirectorySwappedForASymlink(t *testing.T) {
	c := upCluster(t, "e2efd1", 63, "--nodes", "2")
	c.waitAllAlive(2)
	base := sharedDir(t, "fdghost-")
	userDirs(t, base, "u")
	u, ww := filepath.Join(base, "u"), filepath.Join(base, "ww")
	userDirs(t, u, "g")
	g, canary := filepath.Join(u, "g"), filepath.Join(base, "canary")
	w, private := filepath.Join(ww, "w"), filepath.Join(ww, "private")
	// In this order: private is in ww (a map's order made it first, at random).
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{canary, 0o755}, {ww, 0o777}, {private, 0o700}} {
		if err := os.Mkdir(d.path, d.mode); err != nil || os.Chmod(d.path, d.mode) != nil {
			t.Fatalf("%s: %v", d.path, err)
		}
	}
	userDirs(t, ww, "w")
	canaryOpens, privateOpens := watchOpens(t, canary), watchOpens(t, private)
	py := job + "u = sys.argv[1]\nos.chdir(sys.argv[2])\n" +
		"fd = os.open(os.path.join(u, 'g', 'ghost'), os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o640)\n" +
		"os.write(fd, b'ghostdata'); os.unlink(os.path.join(u, 'g', 'ghost'))\n" +
		"for i in range(100000):\n    print(i, os.pread(fd, 9, 0).decode(), flush=True)\n    time.sleep(0.05)\n"
	id := c.start("1", "python3", "-c", py, u, w)
	c.waitLines(id, 3)
	st, err := emu.Load(c.name)
	if err != nil {
		t.Fatal(err)
	}
	// Where CRIU made them: at the deleted file's path (or where a
	// symlink there led), and the cluster's own directories (the nodes'
	// /tmp among them).
	everywhere := []string{base, emu.ImageDir(c.name)}
	for _, n := range st.Nodes {
		everywhere = append(everywhere, n.Dir)
	}
	// clean checks that nobody opened the canary or the private directory
	// since the last look, CRIU's leftovers, and that the job runs on node
	// with its deleted file's content.
	clean := func(node string) {
		t.Helper()
		if n, m := canaryOpens.opens(t), privateOpens.opens(t); n != 0 || m != 0 {
			t.Fatalf("the canary was opened %d times, the private directory %d times", n, m)
		}
		if ents, err := os.ReadDir(canary); err != nil || len(ents) != 0 {
			t.Fatalf("the canary holds %v (%v)", ents, err)
		}
		if left := crLeftovers(everywhere...); len(left) > 0 {
			t.Fatalf("CRIU left %v", left)
		}
		canaryOpens.opens(t) // this look's own, and the walk's
		privateOpens.opens(t)
		if j := c.job(id); j.Node != node || j.State != "running" {
			t.Fatalf("the job: node %s, state %s; want running on %s", j.Node, j.State, node)
		}
		n := c.lines(id)
		c.waitLines(id, n+3)
		logs := strings.Split(strings.TrimSpace(c.mustRun("--node", "1", "logs", id)), "\n")
		if last := logs[len(logs)-1]; !strings.HasSuffix(last, " ghostdata") {
			t.Fatalf("the job reads %q from its deleted file", last)
		}
		waitFor(t, 30*time.Second, "one copy of the job", func() (bool, string) {
			pids, states := copies(id)
			return len(pids) == 1, fmt.Sprintf("copies %v, states %q (%s)", pids, states, roamInits())
		})
	}

	out, err := c.migrateSwapping(id, "1", "2", 3*time.Minute, func() { aside(t, g, symlinkTo(canary)) })
	if err != nil {
		t.Fatalf("migrate with the deleted file's directory swapped: %v %s", err, out)
	}
	clean("2")
	mend(t, g)

	out, err = c.migrateSwapping(id, "2", "1", 3*time.Minute, func() {
		aside(t, g, symlinkTo(canary))
		aside(t, w, symlinkTo(canary))
	})
	if err == nil || !strings.Contains(out, "Too many levels of symbolic links") {
		t.Fatalf("migrate with the working directory swapped for a symlink: %v %q; want refused by CRIU's open (ELOOP)", err, out)
	}
	clean("2")
	mend(t, g)
	mend(t, w)

	out, err = c.migrateSwapping(id, "2", "1", 3*time.Minute, func() {
		if err := os.Rename(w, w+".real"); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(private, w); err != nil {
			t.Fatal(err)
		}
	})
	if err == nil || !strings.Contains(out, "Permission denied") {
		t.Fatalf("migrate with the working directory swapped for root's: %v %q; want refused by CRIU's open as the user (EACCES)", err, out)
	}
	if err := os.Rename(w, private); err != nil || os.Rename(w+".real", w) != nil {
		t.Fatalf("putting the directories back: %v", err)
	}
	clean("2")

	c.mustRun("--node", "2", "migrate", id, "1")
	clean("1")
}

// openWatch counts the opens of the file at path (inotify's IN_OPEN) from
// now on.
type openWatch struct {
	fd   int
	path string
}

func watchOpens(t *testing.T, path string) *openWatch {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if _, err := unix.InotifyAddWatch(fd, path, unix.IN_OPEN); err != nil {
		t.Fatal(err)
	}
	return &openWatch{fd: fd, path: path}
}

// opens is how many opens were seen since the last call.
func (w *openWatch) opens(t *testing.T) int {
	t.Helper()
	n := 0
	buf := make([]byte, 64*unix.SizeofInotifyEvent)
	for {
		k, err := unix.Read(w.fd, buf)
		if errors.Is(err, unix.EAGAIN) {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		n += k / unix.SizeofInotifyEvent
	}
}

// A user's job maps two files of its own and holds a third open. Once the
// destination has checked them, the user puts a FIFO at the first mapped
// file's path, and symlinks to a device at the others': CRIU, which
// opened each by path as root before it compared anything, blocked on
// the FIFO until its time limit (10 minutes, and a worker held for each
// try), and opened the device as root (a watchdog arms so). The job moves
// at once with its own files, the device never opened (an inotify watch
// on it counts opens) and the FIFO never waited on. Its working directory,
// which CRIU opens by path, swapped for a FIFO and then for a symlink to
// the device: the migration is refused at once, the device never opened.
func TestFilesMappedFileSwappedForAFIFOAndADevice(t *testing.T) {
	c := upCluster(t, "e2efd2", 64, "--nodes", "2")
	c.waitAllAlive(2)
	base := sharedDir(t, "fdmap-")
	userDirs(t, base, "u")
	u := filepath.Join(base, "u")
	userDirs(t, u, "w")
	for name, data := range map[string]string{"m1": "maps1", "m2": "maps2", "r": "reads"} {
		p := filepath.Join(u, name)
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil || os.Chown(p, int(jobUser.uid), int(jobUser.gid)) != nil {
			t.Fatalf("%s: %v", p, err)
		}
	}
	// A device of its own that counts its opens: /dev/full's numbers, at
	// a path of root's no other process knows.
	devDir := filepath.Join(base, "dev")
	if err := os.Mkdir(devDir, 0o755); err != nil {
		t.Fatal(err)
	}
	dev := filepath.Join(devDir, "full")
	if err := unix.Mknod(dev, unix.S_IFCHR|0o666, int(unix.Mkdev(1, 7))); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dev, 0o666); err != nil {
		t.Fatal(err)
	}
	opens := watchOpens(t, dev)
	if f, err := os.Open(dev); err != nil {
		t.Fatal(err)
	} else {
		f.Close()
	}
	if n := opens.opens(t); n != 1 {
		t.Fatalf("the watch saw %d opens of %s, not the one made", n, dev)
	}
	py := job + "u = sys.argv[1]\nos.chdir(os.path.join(u, 'w'))\nmaps = []\n" +
		"for name in ('m1', 'm2'):\n    with open(os.path.join(u, name), 'rb') as f:\n        maps.append(mmap.mmap(f.fileno(), 0, prot=mmap.PROT_READ))\n" +
		"r = open(os.path.join(u, 'r'), 'rb')\n" +
		"for i in range(100000):\n    r.seek(0)\n    print(i, maps[0][:5].decode(), maps[1][:5].decode(), r.read(5).decode(), flush=True)\n    time.sleep(0.05)\n"
	id := c.start("1", "python3", "-c", py, u)
	c.waitLines(id, 3)
	m1, m2, r, w := filepath.Join(u, "m1"), filepath.Join(u, "m2"), filepath.Join(u, "r"), filepath.Join(u, "w")
	// moved checks the job runs on node with its own files.
	moved := func(node string) {
		t.Helper()
		if j := c.job(id); j.Node != node || j.State != "running" {
			t.Fatalf("the job: node %s, state %s; want running on %s", j.Node, j.State, node)
		}
		n := c.lines(id)
		c.waitLines(id, n+3)
		logs := strings.Split(strings.TrimSpace(c.mustRun("--node", "1", "logs", id)), "\n")
		if last := logs[len(logs)-1]; !strings.HasSuffix(last, " maps1 maps2 reads") {
			t.Fatalf("the moved job reads %q", last)
		}
	}

	out, err := c.migrateSwapping(id, "1", "2", 90*time.Second, func() {
		aside(t, m1, func(p string) error { return syscall.Mkfifo(p, 0o644) })
	})
	if err != nil {
		t.Fatalf("migrate with a mapped file swapped for a FIFO: %v %s", err, out)
	}
	moved("2")
	mend(t, m1)

	out, err = c.migrateSwapping(id, "2", "1", 90*time.Second, func() {
		aside(t, m2, symlinkTo(dev))
		aside(t, r, symlinkTo(dev))
	})
	if n := opens.opens(t); n != 0 {
		t.Fatalf("%s was opened %d times (migrate: %v %s)", dev, n, err, out)
	}
	if err != nil {
		t.Fatalf("migrate with files swapped for symlinks to a device: %v %s", err, out)
	}
	moved("1")
	mend(t, m2)
	mend(t, r)

	// The working directory, which CRIU still opens by path, as root: a
	// FIFO put there does not hold the restore (roam's CRIU opens a
	// directory with O_DIRECTORY, scripts/criu-patches/0003), and a
	// symlink to the device does not open it; both are refused, and the
	// job runs on where it was.
	out, err = c.migrateSwapping(id, "1", "2", 90*time.Second, func() {
		aside(t, w, func(p string) error { return syscall.Mkfifo(p, 0o755) })
	})
	if err == nil {
		t.Fatalf("migrate with the working directory swapped for a FIFO: moved (%s)", out)
	}
	mend(t, w)
	moved("1")
	out, err = c.migrateSwapping(id, "1", "2", 90*time.Second, func() { aside(t, w, symlinkTo(dev)) })
	if n := opens.opens(t); n != 0 {
		t.Fatalf("%s was opened %d times (migrate: %v %s)", dev, n, err, out)
	}
	if err == nil {
		t.Fatalf("migrate with the working directory swapped for a symlink to a device: moved (%s)", out)
	}
	mend(t, w)
	moved("1")
}
