package e2e

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"roam/internal/emu"
	"roam/internal/procfs"
)

// withoutTMPDIR is cmd with no TMPDIR in its environment, which roam run
// hands the job: its programs then keep their temporary files in /tmp.
func withoutTMPDIR(cmd *exec.Cmd) *exec.Cmd {
	cmd.Env = slices.DeleteFunc(cmd.Env, func(e string) bool { return strings.HasPrefix(e, "TMPDIR=") })
	return cmd
}

// A job's /tmp and /var/tmp are its own: a user's job (uid above 65,535,
// several groups) keeps a file in each, holding the one in /tmp open
// (which pinned it while /tmp was the node's). Neither node's /tmp nor
// this machine's has them. It moves 1 -> 2, is checkpointed there and
// ended, restarted on 1 from the file, and reads both back, through its
// descriptor too.
func TestJobTmpMovesWithIt(t *testing.T) {
	c := upCluster(t, "e2etmp", 60, "--nodes", "2")
	c.waitAllAlive(2)
	dir := userDir(t)
	st, err := emu.Load(c.name)
	if err != nil {
		t.Fatal(err)
	}
	m := marker(t)
	gate := filepath.Join(dir, "go")
	script := fmt.Sprintf(`echo %[1]s-tmp > /tmp/%[1]s; echo %[1]s-var > /var/tmp/%[1]s; exec 3</tmp/%[1]s; echo ready
while [ ! -e %[2]s ]; do sleep 0.1; done
cat /tmp/%[1]s /var/tmp/%[1]s; cat <&3; stat -c '%%a %%u' /tmp /var/tmp`, m, gate)
	cmd := c.roamAs(jobUser, "--node", "1", "run", "-d", "--on", "1", "sh", "-c", script)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run as the user: %v: %s", err, out)
	}
	id := strings.TrimSpace(string(out))
	c.waitLines(id, 1)
	// The job's files are in neither the node's /tmp nor this machine's.
	notThere := func(node int) {
		t.Helper()
		for _, d := range emu.NodeLocal {
			for _, p := range []string{filepath.Join(emu.LocalDir(st.Nodes[node].Dir, d), m), filepath.Join(d, m)} {
				if _, err := os.Stat(p); err == nil {
					t.Fatalf("the job's %s is at %s, outside the job", filepath.Join(d, m), p)
				}
			}
		}
	}
	notThere(0)
	if out, err := c.roamAs(jobUser, "--node", "1", "migrate", id, "2").CombinedOutput(); err != nil {
		t.Fatalf("migrate a job holding a file of its /tmp: %v: %s", err, out)
	}
	notThere(1)
	file := filepath.Join(dir, "job.roamckpt")
	if out, err := c.roamAs(jobUser, "--node", "1", "checkpoint", id, "-o", file, "--stop").CombinedOutput(); err != nil {
		t.Fatalf("checkpoint: %v: %s", err, out)
	}
	if j := c.waitFinished(id, 30*time.Second); j.Node != "2" || j.Migrations != 1 {
		t.Fatalf("the checkpointed job: %+v", j)
	}
	if out, err := c.roamAs(jobUser, "--node", "1", "restart", "-d", "--on", "1", file).CombinedOutput(); err != nil {
		t.Fatalf("restart on node 1: %v: %s", err, out)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	j := c.waitFinished(id, time.Minute)
	want := fmt.Sprintf("ready\n%[1]s-tmp\n%[1]s-var\n%[1]s-tmp\n1777 0\n1777 0\n", m)
	if got := c.mustRun("--node", "1", "logs", id); j.ExitCode == nil || *j.ExitCode != 0 || j.Node != "1" || got != want {
		t.Fatalf("the job after a move, a checkpoint and a restart: %+v, output %q, want %q", j, got, want)
	}
}

// heldTmp are the files /tmp/cc*.s that job id's processes hold open (gcc
// without -pipe writes its assembly there), on the copy of it that runs.
func heldTmp(id string) map[string]bool {
	out := map[string]bool{}
	pids, states := copies(id)
	for i, pid := range pids {
		if states[i] == 'X' {
			continue
		}
		for _, p := range procfs.Tree(pid) {
			dir := "/proc/" + strconv.Itoa(p) + "/fd/"
			ents, _ := os.ReadDir(dir)
			for _, e := range ents {
				if l, err := os.Readlink(dir + e.Name()); err == nil && strings.HasPrefix(l, "/tmp/cc") && strings.HasSuffix(l, ".s") {
					out[l] = true
				}
			}
		}
	}
	return out
}

// writeCTree writes n C files that take gcc -O2 about a second each, and
// a Makefile that builds their objects and fails if TMPDIR is set.
func writeCTree(t *testing.T, dir string, n int) {
	t.Helper()
	for i := range n {
		var b bytes.Buffer
		b.WriteString("#include <stdint.h>\n")
		for k := range 200 {
			fmt.Fprintf(&b, "uint64_t f%d_%d(uint64_t x) { uint64_t a = x * %du; for (int j = 0; j < %d; j++) { a ^= a >> %d; a *= 0x9E3779B97F4A7C15ull + %d; a += (uint64_t)j * %du; } return a; }\n",
				i, k, k+i+3, k%7+3, k%13+1, k, i+1)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d.c", i)), b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	mk := "OBJS := $(patsubst %.c,%.o,$(wildcard *.c))\nall: notmpdir $(OBJS)\nnotmpdir:\n\t@test -z \"$$TMPDIR\"\n%.o: %.c\n\tgcc -O2 -c -o $@ $<\n.PHONY: all notmpdir\n"
	if err := os.WriteFile(filepath.Join(dir, "Makefile"), []byte(mk), 0o644); err != nil {
		t.Fatal(err)
	}
}

// make -j2 of a tree of C files, as a user and with no TMPDIR, gcc's
// temporary files in the job's own /tmp, moves twice while gcc holds one
// of them open (the same file open before and after each move: it was
// open throughout the freeze), and builds the same objects as make on
// this machine, byte for byte.
func TestCompilerTmpMoves(t *testing.T) {
	c := upCluster(t, "e2etmpc", 61, "--nodes", "2")
	c.waitAllAlive(2)
	uid, gid := jobUser.uid, jobUser.gid
	dir := userDir(t)
	src := filepath.Join(dir, "src")
	ref := filepath.Join(dir, "ref")
	for _, d := range []string{src, ref} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		writeCTree(t, d, 20)
	}
	if out, err := exec.Command("chown", "-R", fmt.Sprintf("%d:%d", uid, gid), src).CombinedOutput(); err != nil {
		t.Fatalf("chown: %v: %s", err, out)
	}
	cmd := withoutTMPDIR(c.roamAs(jobUser, "--node", "1", "run", "-d", "--on", "1", "make", "-j2"))
	cmd.Dir = src
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run make as the user: %v: %s", err, out)
	}
	id := strings.TrimSpace(string(out))
	t.Cleanup(func() { _, _ = c.run("--node", "1", "kill", "-s", "KILL", id) })
	moved, node := 0, "1"
	for try := 1; moved < 2; try++ {
		if try > 10 {
			t.Fatalf("in %d moves, gcc held the same /tmp file before and after only %d times", try-1, moved)
		}
		var before map[string]bool
		waitFor(t, time.Minute, id+" holds a /tmp/cc*.s", func() (bool, string) {
			before = heldTmp(id)
			j, _ := c.lookup(id)
			if j.State == "finished" {
				t.Fatalf("make ended after %d moves while gcc held its /tmp file: %+v", moved, j)
			}
			return len(before) > 0, "none: " + j.State
		})
		to := map[string]string{"1": "2", "2": "1"}[node]
		if out, err := c.roamAs(jobUser, "--node", "1", "migrate", id, to).CombinedOutput(); err != nil {
			t.Fatalf("migrate make while gcc holds %v: %v: %s", before, err, out)
		}
		node = to
		for f := range heldTmp(id) {
			if before[f] {
				moved++
				break
			}
		}
	}
	j := c.waitFinished(id, 3*time.Minute)
	if j.ExitCode == nil || *j.ExitCode != 0 {
		t.Fatalf("make: %+v: %s", j, c.mustRun("--node", "1", "logs", id))
	}
	refMake := exec.Command("make", "-s", "-j2")
	refMake.Env, refMake.Dir = os.Environ(), ref
	refMake = withoutTMPDIR(refMake)
	if out, err := refMake.CombinedOutput(); err != nil {
		t.Fatalf("make on this machine: %v: %s", err, out)
	}
	objs, _ := filepath.Glob(filepath.Join(ref, "*.o"))
	if len(objs) != 20 {
		t.Fatalf("make on this machine built %d objects", len(objs))
	}
	for _, o := range objs {
		want, _ := os.ReadFile(o)
		got, err := os.ReadFile(filepath.Join(src, filepath.Base(o)))
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s of the build that moved differs from this machine's (%v)", filepath.Base(o), err)
		}
	}
	t.Logf("make moved %d times, %d of them while gcc held the same /tmp file", j.Migrations, moved)
}
