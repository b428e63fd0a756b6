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
	dir := filepath.Join(e2eRoot, "keeper-"+marker(t))
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	src, prog, secret := filepath.Join(dir, "keeper.c"), filepath.Join(dir, "keeper"), filepath.Join(dir, "secret")
	os.WriteFile(src, []byte(keeperC), 0o644)
	if out, err := exec.Command("gcc", "-O2", "-o", prog, src).CombinedOutput(); err != nil {
		t.Fatalf("gcc: %v: %s", err, out)
	}
	if err := os.Chmod(prog, os.ModeSetuid|0o755); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 24)
	rand.Read(b)
	canary := []byte("canary-" + hex.EncodeToString(b))
	if err := os.WriteFile(secret, canary, 0o600); err != nil {
		t.Fatal(err)
	}
	id := c.start("1", "sh", "-c", prog+" "+secret+" 2>&1")
	waitFor(t, 30*time.Second, id+" ready", func() (bool, string) {
		out, _ := c.run("--node", "1", "logs", id)
		j := c.job(id)
		code := -1
		if j.ExitCode != nil {
			code = *j.ExitCode
		}
		errs, _ := c.run("--node", "1", "logs", "--stderr", id)
		return strings.Contains(out, "ready\n"), fmt.Sprintf("%s %d %q %q", j.State, code, out, errs)
	})

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
	st, err := emu.Load(c.name)
	if err != nil {
		t.Fatal(err)
	}
	roots := []string{emu.ImageDir(c.name), filepath.Dir(out)}
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
