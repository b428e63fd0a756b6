package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A job holds a file open for writing in a shared directory; on the
// destination the same path names something else: a symlink to a file of
// root's (made there by another job of the user), or another file. CRIU
// would reopen the path as root and hand the restored job that file. The
// migration is refused before anything is frozen, naming the file; the
// job runs on where it was, and the other file is untouched.
func TestMigrationRefusesAnotherFileAtTheSamePath(t *testing.T) {
	c := upCluster(t, "e2esym", 37, "--nodes", "2")
	c.waitAllAlive(2)
	base, err := os.MkdirTemp(e2eRoot, "sym-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(base, "u")       // the job's directory, shared
	other := filepath.Join(base, "other") // what node 2 sees at dir instead
	victim := filepath.Join(base, "victim")
	if err := os.Chmod(base, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, other} {
		if err := os.Mkdir(d, 0o755); err != nil || os.Chown(d, int(jobUser.uid), int(jobUser.gid)) != nil {
			t.Fatalf("%s: %v", d, err)
		}
		if err := os.Chown(d, int(jobUser.uid), int(jobUser.gid)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(victim, []byte("root's secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "f")
	id := c.start("1", migjob(t), "file", "200", marker(t), file)
	c.waitLines(id, 3)

	// Node 2's own view of dir: the other directory, bound over it in
	// node 2's mount namespace, as a node whose copy of the path differs.
	inNode2 := func(args ...string) *exec.Cmd {
		return exec.Command("nsenter", append([]string{fmt.Sprintf("--mount=/proc/%d/ns/mnt", c.status().Nodes[1].PID)}, args...)...)
	}
	if out, err := inNode2("mount", "--bind", other, dir).CombinedOutput(); err != nil {
		t.Fatalf("bind over %s on node 2: %v %s", dir, err, out)
	}
	t.Cleanup(func() { inNode2("umount", "-l", dir).Run() })

	// refused migrates job id to node 2, which must be refused with every
	// one of wants in the error and the job neither frozen nor stopped.
	refused := func(id string, wants ...string) {
		t.Helper()
		before := c.lines(id)
		out, err := c.run("--node", "1", "migrate", id, "2")
		for _, w := range wants {
			if err == nil || !strings.Contains(out, w) {
				t.Fatalf("migrate: %v %q; want refused, naming %q", err, out, wants)
			}
		}
		j := c.job(id)
		last := j.MigrationLog[len(j.MigrationLog)-1]
		if j.Node != "1" || j.State != "running" || last.OK || last.FreezeMS != 0 {
			t.Fatalf("after the refusal: node %s, state %s, last migration %+v (want not frozen)", j.Node, j.State, last)
		}
		c.waitLines(id, before+2)
		t.Logf("refused before freezing: %s", strings.TrimSpace(out))
	}
	try := func(want string) { t.Helper(); refused(id, file, want) }

	// A symlink to root's file.
	if err := os.Symlink(victim, filepath.Join(other, "f")); err != nil {
		t.Fatal(err)
	}
	try("symlink")
	// Another regular file, the user's too.
	os.Remove(filepath.Join(other, "f"))
	if err := os.WriteFile(filepath.Join(other, "f"), nil, 0o644); err != nil || os.Chown(filepath.Join(other, "f"), int(jobUser.uid), int(jobUser.gid)) != nil {
		t.Fatal(err)
	}
	if err := os.Chown(filepath.Join(other, "f"), int(jobUser.uid), int(jobUser.gid)); err != nil {
		t.Fatal(err)
	}
	try("not the file the job has open")

	if b, err := os.ReadFile(victim); err != nil || string(b) != "root's secret\n" {
		t.Fatalf("the victim: %q %v", b, err)
	}
	// Once node 2 sees the same file again, the job moves.
	inNode2("umount", "-l", dir).Run()
	c.mustRun("--node", "1", "migrate", id, "2")
	if j := c.job(id); j.Node != "2" {
		t.Fatalf("after the path was mended: on node %s", j.Node)
	}

	// A job whose process changed its effective uid is refused before
	// anything freezes (CRIU would freeze it and then fail to dump it
	// here, and the destination would refuse the restored task anyway),
	// and it runs on.
	py := "import os, time\nos.setresuid(0, 65534, 0)\nfor i in range(100000):\n    print(i, flush=True)\n    time.sleep(0.1)\n"
	suid := c.startAs(root, "1", "python3", "-c", py)
	c.waitLines(suid, 3)
	refused(suid, "65534", "changed their credentials")
}

// The same attack, in the race: the paths are the job's when the
// destination checks them, before anything freezes, and symlinks to root's
// once CRIU starts to restore (migrateSwapping): another job of the user
// renames them aside and puts the symlinks in their place, in the shared
// directory. The
// job's file (held for append, so that CRIU would check no size, and
// root's file of the same mode) goes to CRIU as the descriptor the check
// opened: the job moves holding its own file, and goes on appending to it
// under its new name; root's file is untouched. Once the path is mended
// it moves back. (A working directory swapped so: the test of the files,
// TestFilesGhostDirectorySwappedForASymlink.)
func TestMigrationRefusesAFileSwappedAfterTheCheck(t *testing.T) {
	c := upCluster(t, "e2eswap", 43, "--nodes", "2")
	c.waitAllAlive(2)
	base, err := os.MkdirTemp(e2eRoot, "swap-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(base, int(jobUser.uid), int(jobUser.gid)); err != nil {
		t.Fatal(err)
	}
	file, aside, victim := filepath.Join(base, "f"), filepath.Join(base, "f.aside"), filepath.Join(base, "victim")
	wd := filepath.Join(base, "w")
	if err := os.WriteFile(victim, []byte("root's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(victim, 0o644); err != nil { // whatever the umask
		t.Fatal(err)
	}
	if err := os.Mkdir(wd, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(base, 0o777); err != nil { // the job user's directory too
		t.Fatal(err)
	}
	py := "import os, sys, time\nos.umask(0o022)\nos.chdir(sys.argv[2])\nf = open(sys.argv[1], 'a')\nfor i in range(100000):\n    f.write('line %d\\n' % i); f.flush()\n    print(i, flush=True)\n    time.sleep(0.05)\n"
	id := c.start("1", "python3", "-c", py, file, wd)
	c.waitLines(id, 3)

	type result struct {
		out string
		err error
	}
	migrate := func(from, to string, swap func()) result {
		t.Helper()
		out, err := c.migrateSwapping(id, from, to, 3*time.Minute, swap)
		return result{out, err}
	}
	swapFile := func() {
		if err := os.Rename(file, aside); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(victim, file); err != nil {
			t.Fatal(err)
		}
	}
	if r := migrate("1", "2", swapFile); r.err != nil {
		t.Fatalf("migrate with the file swapped: %v %s", r.err, r.out)
	}
	if j := c.job(id); j.Node != "2" || j.State != "running" {
		t.Fatalf("after the move: node %s, state %s", j.Node, j.State)
	}
	n := c.lines(id)
	c.waitLines(id, n+3)
	if b, err := os.ReadFile(victim); err != nil || string(b) != "root's\n" {
		t.Fatalf("root's file: %q %v", b, err)
	}
	if b, err := os.ReadFile(aside); err != nil || !strings.Contains(string(b), fmt.Sprintf("line %d\n", n+1)) {
		t.Fatalf("the job's own file does not go on: %v, %d bytes", err, len(b))
	}
	// Mended: its file is at its path again (the job holds it still).
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(aside, file); err != nil {
		t.Fatal(err)
	}
	// It moves, and the job goes on appending to its file.
	c.mustRun("--node", "2", "migrate", id, "1")
	if j := c.job(id); j.Node != "1" {
		t.Fatalf("after the path was mended: on node %s", j.Node)
	}
	n = c.lines(id)
	c.waitLines(id, n+3)
	if b, err := os.ReadFile(file); err != nil || !strings.Contains(string(b), fmt.Sprintf("line %d\n", n+1)) {
		t.Fatalf("after the move, the job's file: %v, %d bytes", err, len(b))
	}
}
