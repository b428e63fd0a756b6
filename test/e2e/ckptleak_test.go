package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"roam/internal/emu"
)

// keeperC is a set-user-id-root program that reads a file only root may
// read into its memory, drops to its caller's uids (which makes it
// non-dumpable, as ssh-keysign with the node's host keys), and waits.
const keeperC = `#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(int argc, char **argv) {
	static char keep[1 << 16];
	FILE *f = fopen(argv[1], "r");
	if (!f || fread(keep, 1, sizeof keep - 1, f) == 0) { perror("read"); return 1; }
	fclose(f);
	for (int i = 1; i < 8; i++) memcpy(keep + i * 4096, keep, 64);
	uid_t u = getuid(); gid_t g = getgid();
	if (setresgid(g, g, g) || setresuid(u, u, u)) { perror("drop"); return 1; }
	printf("ready\n"); fflush(stdout);
	for (;;) pause();
}
`

// A user's job with a process that read root's secret as set-user-id
// root and dropped to the user's uids (non-dumpable, its memory not the
// user's to read): roam checkpoint, asked by the user, is refused naming
// that task, the job runs on, and no file anywhere (the file asked for,
// the nodes' image and state directories, the user's) holds the secret.
func TestCheckpointOfAPrivilegedMemoryIsRefused(t *testing.T) {
	c := upCluster(t, "e2eleak", 46, "--nodes", "2")
	c.waitAllAlive(2)
	prog, secret, canary := buildKeeper(t)
	id := c.start("1", "sh", "-c", prog+" "+secret+" 2>&1")
	c.waitOutput(id, "ready\n")

	out := filepath.Join(userDir(t), "job.roamckpt")
	msg, err := c.roamAs(jobUser, "--node", "1", "checkpoint", id, "-o", out).CombinedOutput()
	if err == nil || !strings.Contains(string(msg), "is not dumpable") || !strings.Contains(string(msg), "task ") {
		t.Fatalf("roam checkpoint of a job holding root's memory: %v: %s; want refused, naming the task", err, msg)
	}
	t.Logf("refused: %s", strings.TrimSpace(string(msg)))
	if j := c.job(id); j.State != "running" || j.Node != "1" {
		t.Fatalf("after the refusal: %+v", j)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatalf("%s was written", out)
	}
	noCanary(t, c, canary, filepath.Dir(out))
}

// buildKeeper builds keeperC set-user-id root and writes a secret only
// root may read: the program's path, the secret's, and its content.
func buildKeeper(t *testing.T) (prog, secret string, canary []byte) {
	t.Helper()
	dir := sharedDir(t, "keeper-")
	src := filepath.Join(dir, "keeper.c")
	prog, secret = filepath.Join(dir, "keeper"), filepath.Join(dir, "secret")
	os.WriteFile(src, []byte(keeperC), 0o644)
	if out, err := exec.Command("gcc", "-O2", "-o", prog, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v: %s", err, out)
	}
	if err := os.Chmod(prog, os.ModeSetuid|0o755); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 24)
	rand.Read(b)
	canary = []byte("canary-" + hex.EncodeToString(b))
	if err := os.WriteFile(secret, canary, 0o600); err != nil {
		t.Fatal(err)
	}
	return prog, secret, canary
}

// noCanary fails the test if any file of c's nodes' image and state
// directories, or of dir, holds canary.
func noCanary(t *testing.T, c *cluster, canary []byte, dir string) {
	t.Helper()
	st, err := emu.Load(c.name)
	if err != nil {
		t.Fatal(err)
	}
	roots := []string{emu.ImageDir(c.name), dir}
	for _, n := range st.Nodes {
		roots = append(roots, n.Dir)
	}
	for _, r := range roots {
		filepath.WalkDir(r, func(p string, d fs.DirEntry, err error) error {
			if err != nil || !d.Type().IsRegular() {
				return nil
			}
			if b, err := os.ReadFile(p); err == nil && bytes.Contains(b, canary) {
				t.Errorf("%s holds root's secret", p)
			}
			return nil
		})
	}
}

// A set-user-id-root process that starts between a checkpoint's checks
// and its freeze (the agent holds the checkpoint there for the test,
// ROAMD_TEST_HOLD_CHECKPOINT): the frozen job is judged again, so the
// checkpoint is refused naming it, or holds nothing of it; no file holds
// the secret it read.
func TestCheckpointJudgesTheFrozenJobAgain(t *testing.T) {
	hold := filepath.Join(e2eRoot, "hold-"+marker(t))
	if err := os.Mkdir(hold, 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(hold) })
	t.Setenv("ROAMD_TEST_HOLD_CHECKPOINT", hold)
	c := upCluster(t, "e2ehold", 47, "--nodes", "2")
	c.waitAllAlive(2)
	prog, secret, canary := buildKeeper(t)
	trigger := filepath.Join(userDir(t), "go")
	id := c.start("1", "sh", "-c", "echo waiting; while [ ! -e "+trigger+" ]; do sleep 0.02; done; "+prog+" "+secret+" 2>&1")
	c.waitOutput(id, "waiting\n")

	out := filepath.Join(userDir(t), "job.roamckpt")
	done := make(chan []byte, 1)
	var err error
	go func() {
		var b []byte
		b, err = c.roamAs(jobUser, "--node", "1", "checkpoint", id, "-o", out).CombinedOutput()
		done <- b
	}()
	var held []string
	waitFor(t, time.Minute, "the checkpoint held before its freeze", func() (bool, string) {
		held, _ = filepath.Glob(filepath.Join(hold, "*.held"))
		return len(held) == 1, fmt.Sprint(held)
	})
	if err := os.WriteFile(trigger, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// Its output waits while the checkpoint is under way: /proc says when
	// the keeper has dropped to the user.
	uids := fmt.Sprintf("Uid:\t%d\t%d\t%d\t%d\n", jobUser.uid, jobUser.uid, jobUser.uid, jobUser.uid)
	waitFor(t, 30*time.Second, "the keeper, dropped to the user", func() (bool, string) {
		procs, _ := filepath.Glob("/proc/[0-9]*/exe")
		for _, p := range procs {
			if exe, _ := os.Readlink(p); exe == prog {
				st, _ := os.ReadFile(filepath.Join(filepath.Dir(p), "status"))
				return strings.Contains(string(st), uids), string(st)
			}
		}
		return false, "no keeper"
	})
	if err := os.WriteFile(strings.TrimSuffix(held[0], ".held")+".go", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	msg := <-done
	if err == nil {
		t.Logf("checkpointed: %s", msg)
	} else if !strings.Contains(string(msg), "is not dumpable") {
		t.Fatalf("roam checkpoint: %v: %s; want refused naming the task, or a file without it", err, msg)
	} else {
		t.Logf("refused: %s", strings.TrimSpace(string(msg)))
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("%s was written", out)
		}
	}
	if j := c.job(id); j.State != "running" || j.Node != "1" {
		t.Fatalf("after the checkpoint: %+v", j)
	}
	noCanary(t, c, canary, filepath.Dir(out))
}
