package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// A kind of kernel state, as the kinds workload holds it, and what a
// migration must do with it.
type stateKind struct {
	kind string
	what string // for the table
	// jobDir: its files go in the job's own directory, which moves with
	// it; otherwise in a directory every node shares.
	jobDir bool
	// pin: a part of the reason it is pinned with, or "" when it moves.
	pin string
	// refused: refused before anything freezes, not pinned (it may end).
	refused bool
	// stopJob: the test stops the whole job with roam kill -s STOP before
	// it moves, and roam ps must show it stopped after each hop.
	stopJob bool
	// userPin: a part of the reason a user's job is pinned with, where it
	// differs from root's (pin).
	userPin string
	// rootOnly: why the kind is not run as a user.
	rootOnly string
}

// pinFor is the reason k's job of owner o is pinned with, or "".
func (k stateKind) pinFor(o owner) string {
	if o.uid != 0 && k.userPin != "" {
		return k.userPin
	}
	return k.pin
}

var stateKinds = []stateKind{
	{kind: "ghost", what: "an open file that was deleted (a temporary file)"},
	{kind: "ghost-big", what: "a deleted file of 256 MiB, past `ghost_bytes`", pin: "holds the deleted file"},
	{kind: "memfd", what: "a memfd, written and mapped"},
	{kind: "shmanon", what: "shared anonymous memory, with a child"},
	{kind: "devzero", what: "a shared mapping of /dev/zero, with a child"},
	{kind: "flock", what: "an flock lock on a file in the job's own directory (root's: its spool; a user's: its /tmp)", jobDir: true},
	{kind: "posixlock", what: "a POSIX (fcntl) lock on a file in the job's own directory (root's: its spool; a user's: its /tmp)", jobDir: true},
	{kind: "ofdlock", what: "an OFD lock on a file in the job's own directory (root's: its spool; a user's: its /tmp)", jobDir: true},
	{kind: "lease", what: "a read lease (F_SETLEASE) on a file in the job's own directory (root's: its spool; a user's: its /tmp)", jobDir: true},
	{kind: "flock-shared", what: "an flock lock on a file in a shared directory", pin: "holds a FLOCK lock on"},
	{kind: "fifo", what: "a named FIFO in the job's own directory with 10 bytes in it", jobDir: true},
	{kind: "fifo-shared", what: "a named FIFO in a shared directory with 10 bytes in it", pin: "holds the named FIFO"},
	{kind: "sysvshm", what: "a SysV shared memory segment"},
	{kind: "sysvsem", what: "a SysV semaphore set"},
	{kind: "mqueue", what: "a POSIX message queue holding a message", pin: "its IPC namespace holds the POSIX message queue"},
	{kind: "mqueue-unlinked", what: "a POSIX message queue, unlinked, holding a message", pin: "holds the POSIX message queue"},
	{kind: "setuid", what: "a child that changed its uids and gids (a set-user-id program)", pin: "changed their credentials", refused: true,
		rootOnly: "a user's process cannot change its ids without a set-id program"},
	{kind: "stopped", what: "a child stopped with SIGSTOP"},
	{kind: "stopped-job", what: "the whole job stopped with `roam kill -s STOP`", stopJob: true},
	{kind: "timerfd", what: "a periodic timerfd"},
	{kind: "posixtimer", what: "a periodic POSIX timer (timer_create)"},
	{kind: "itimer", what: "a periodic interval timer (setitimer)"},
	{kind: "procself", what: "its own /proc/self/maps, held open"},
	{kind: "eventfd", what: "an eventfd holding 5"},
	{kind: "signalfd", what: "a signalfd with a signal pending"},
	{kind: "epoll", what: "an epoll set with a ready eventfd"},
	{kind: "socketpair", what: "a unix socket pair to a child, 10 bytes in flight"},
	{kind: "pipe", what: "a pipe from a child, 10 bytes in flight"},
	{kind: "sleep", what: "a child in a 3 s nanosleep"},
	{kind: "threads", what: "32 threads"},
	{kind: "process", what: "rlimits, prctl name and subreaper, environment, working directory"},
	{kind: "inotify-removed", what: "an inotify watch on a directory since removed"},
	{kind: "removed-cwd", what: "a working directory since removed", pin: "works in the removed directory"},
}

// Each kind of kernel state migrates 1→2→3→1 with its state checked by
// the program itself after each hop, or is refused before anything
// freezes with the kernel object named; the result is the table in
// docs/migration.md (ROAM_UPDATE_DOCS=1 rewrites it from this run).
func TestMigrationKinds(t *testing.T) {
	prog := workload(t, "kinds")
	c := upCluster(t, "e2ekinds", 38, "--nodes", "3")
	c.waitAllAlive(3)
	// Not t.TempDir, whose parent only root may enter.
	shared, err := os.MkdirTemp("", "kinds-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(shared) })
	os.Chmod(shared, 0o755)
	rows := map[string]string{}
	for _, o := range []owner{jobUser, root} {
		dir := filepath.Join(shared, o.name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(dir, int(o.uid), int(o.gid)); err != nil {
			t.Fatal(err)
		}
		for _, k := range stateKinds {
			t.Run(k.kind+"/"+o.name, func(t *testing.T) {
				c.t = t
				if o.uid != 0 && k.rootOnly != "" {
					rows[k.kind+"/"+o.name] = "not run: " + k.rootOnly
					return
				}
				rows[k.kind+"/"+o.name] = c.moveKind(k, o, prog, dir, shared)
			})
		}
	}
	c.t = t
	// Two jobs on one node, each with a SysV segment of the same key: each
	// sees its own (the program creates it with IPC_EXCL and checks its
	// content), before and after one of them moves.
	t.Run("sysvshm-two-jobs", func(t *testing.T) {
		c.t = t
		a := c.start("1", prog, "sysvshm", filepath.Join(shared, jobUser.name))
		b := c.start("1", prog, "sysvshm", filepath.Join(shared, jobUser.name))
		t.Cleanup(func() { c.run("--node", "1", "kill", "-s", "KILL", a, b) })
		c.waitOutput(a, "ready\n")
		c.waitOutput(b, "ready\n")
		c.mustRun("--node", "1", "migrate", a, "2")
		for _, id := range []string{a, b} {
			c.mustRun("--node", "1", "kill", "-s", "USR1", id)
			c.waitOutput(id, "ok 1\n")
		}
		rows["sysvshm-two-jobs"] = "each job sees its own segment of the same key, before and after one moves"
	})
	c.t = t
	if t.Failed() {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| kind | what the program holds | a user's job (uid %d, %d groups) | root's job |\n|---|---|---|---|\n", jobUser.uid, len(jobUser.groups))
	for _, k := range stateKinds {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", k.kind, k.what, rows[k.kind+"/"+jobUser.name], rows[k.kind+"/root"])
	}
	fmt.Fprintf(&b, "| `sysvshm` ×2 | two jobs, one SysV key | %s | |\n", rows["sysvshm-two-jobs"])
	checkDocTable(t, "../../docs/migration.md", "kinds", b.String())
}

// waitState waits until roam ps shows job id in state.
func (c *cluster) waitState(id, state string) {
	c.t.Helper()
	waitFor(c.t, 30*time.Second, fmt.Sprintf("%s %s in ps", id, state), func() (bool, string) {
		j := c.job(id)
		return j.State == state, j.State
	})
}

// waitOutput waits until job id's output holds s.
func (c *cluster) waitOutput(id, s string) {
	c.t.Helper()
	waitFor(c.t, 30*time.Second, fmt.Sprintf("%q from %s", s, id), func() (bool, string) {
		out, _ := c.run("--node", "1", "logs", id)
		if strings.Contains(out, "FAIL") || strings.Contains(out, "setup failed") {
			c.t.Fatalf("%s: %s", id, out)
		}
		return strings.Contains(out, s), out
	})
}

var (
	kindsFile   = regexp.MustCompile(`kinds-([a-z-]+)-[0-9]+`)
	kindsQueue  = regexp.MustCompile(`/roam-kinds-[0-9]+`)
	processNum  = regexp.MustCompile(`(process|task) [0-9]+`)
	jobIDInText = regexp.MustCompile(`\b[0-9]+\.[0-9]+\b`)
)

// normalizeReason makes a refusal the same in every run: no directory,
// file or process numbers.
func normalizeReason(s, shared string) string {
	s = strings.ReplaceAll(s, shared, "DIR")
	s = kindsFile.ReplaceAllString(s, "kinds-$1-PID")
	s = kindsQueue.ReplaceAllString(s, "/roam-kinds-PID")
	s = processNum.ReplaceAllString(s, "$1 N")
	s = jobIDInText.ReplaceAllString(s, "JOB")
	return strings.ReplaceAll(s, "|", "\\|")
}

// checkDocTable compares a table a test made with the one between the
// "<!-- NAME table -->" and "<!-- end NAME table -->" lines of doc, and
// with ROAM_UPDATE_DOCS=1 writes it there instead.
func checkDocTable(t *testing.T, doc, name, table string) {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	begin, end := "<!-- "+name+" table -->\n", "<!-- end "+name+" table -->"
	i, j := strings.Index(string(b), begin), strings.Index(string(b), end)
	if i < 0 || j < i {
		t.Fatalf("%s has no %q ... %q", doc, begin, end)
	}
	got := string(b[i+len(begin) : j])
	if got == table {
		return
	}
	if os.Getenv("ROAM_UPDATE_DOCS") == "1" {
		if err := os.WriteFile(doc, []byte(string(b[:i+len(begin)])+table+string(b[j:])), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: table %s rewritten", filepath.Base(doc), name)
		return
	}
	t.Errorf("%s's %s table differs from this run's (ROAM_UPDATE_DOCS=1 rewrites it):\n%s", doc, name, table)
}

// moveKind runs the kinds program holding kind k as o, with its files in
// dir (or in the job's own directory), and moves it 1→2→3→1, checking
// its state after each hop, or checks that it is refused. It returns the
// result for the table.
func (c *cluster) moveKind(k stateKind, o owner, prog, dir, shared string) string {
	t := c.t
	if k.jobDir {
		// The job's own directory: root's job may write in its spool; a
		// user's may not (it holds the status the agent trusts), and
		// keeps such files in its own /tmp, which moves with it too.
		dir = "/run/roam/job"
		if o.uid != 0 {
			dir = "/tmp"
		}
	}
	pin, result := k.pinFor(o), "moves 1→2→3→1, checked after each hop"
	id := c.startAs(o, "1", prog, k.kind, dir)
	t.Cleanup(func() { c.run("--node", "1", "kill", "-s", "KILL", id) })
	c.waitOutput(id, "ready\n")
	if k.stopJob {
		c.mustRun("--node", "1", "kill", "-s", "STOP", id)
		c.waitState(id, "stopped")
	}
	for hop, to := range []string{"2", "3", "1"} {
		out, err := c.run("--node", "1", "migrate", id, to)
		if pin != "" {
			if err == nil || !strings.Contains(out, pin) {
				t.Fatalf("migrate to %s: %v: %s; want refused with %q", to, err, out, pin)
			}
			if j := c.job(id); j.State != "running" || j.Node != "1" {
				t.Fatalf("after the refusal: %s on %s", j.State, j.Node)
			}
			result = "pinned: " + normalizeReason(strings.TrimSpace(out), shared)
			if k.refused {
				result = "refused before anything freezes, not pinned (the process may end): " + normalizeReason(strings.TrimSpace(out), shared)
			}
			break
		}
		if err != nil {
			t.Fatalf("migrate to %s: %v: %s", to, err, out)
		}
		if j := c.job(id); j.Node != to {
			t.Fatalf("after migrating to %s: on %s", to, j.Node)
		}
		if k.stopJob {
			// Stopped where it now runs, as /proc says.
			if j := c.job(id); j.State != "stopped" {
				t.Fatalf("after migrating to %s: %s, want stopped", to, j.State)
			}
			continue
		}
		c.mustRun("--node", "1", "kill", "-s", "USR1", id)
		c.waitOutput(id, fmt.Sprintf("ok %d\n", hop+1))
	}
	if k.stopJob {
		// A check asked for while it is stopped runs once roam
		// kill -s CONT continues it, where it now runs.
		c.mustRun("--node", "1", "kill", "-s", "USR1", id)
		time.Sleep(500 * time.Millisecond) // a running job answers in 20 ms
		if out, _ := c.run("--node", "1", "logs", id); strings.Contains(out, "ok 1") {
			t.Fatalf("the stopped job ran: %s", out)
		}
		c.mustRun("--node", "1", "kill", "-s", "CONT", id)
		c.waitOutput(id, "ok 1\n")
		c.waitState(id, "running")
		result = "moves 1→2→3→1, `roam ps` shows it stopped after each hop; `roam kill -s CONT` continues it"
	} else if pin == "" && k.kind == "stopped" {
		// roam kill -s CONT continues it where it now runs.
		c.mustRun("--node", "1", "kill", "-s", "CONT", id)
		c.mustRun("--node", "1", "kill", "-s", "USR2", id)
		c.waitOutput(id, "ok 4\n")
	}
	c.mustRun("--node", "1", "kill", "-s", "TERM", id)
	j := c.waitFinished(id, 30*time.Second)
	if j.ExitCode == nil || *j.ExitCode != 0 {
		out, _ := c.run("--node", "1", "logs", id)
		t.Fatalf("exit %v: %s", j.ExitCode, out)
	}
	return result
}

// A job's tasks that share a file CRIU takes as external (a parent and its
// children share their program and libraries) may open it at the same
// time as they are restored. Unpatched CRIU pointed the one entry all
// tasks share at a task's own stack for that open, and a restore failed
// when two met there ("Can't open file fd/4 on restore: No such file or
// directory", TestMigrationKinds's devzero, once in CI);
// scripts/criu-patches/0006 opens through a copy of the entry instead.
// CRIU_FAULT=200 (0007) holds each such open 3 ms, so that the tasks meet
// there on every restore: without 0006 every hop below fails.
func TestMigrationOfTasksSharingTheirProgram(t *testing.T) {
	c := upClusterEnv(t, "e2eshare", 48, []string{"CRIU_FAULT=200"}, "--nodes", "2")
	c.waitAllAlive(2)
	id := c.start("1", "/bin/sh", "-c", "for i in $(seq 16); do sleep 1000 & done; echo ready; wait")
	t.Cleanup(func() { c.run("--node", "1", "kill", "-s", "KILL", id) })
	c.waitOutput(id, "ready\n")
	for _, to := range []string{"2", "1", "2"} {
		if out, err := c.run("--node", "1", "migrate", id, to); err != nil {
			t.Fatalf("migrate to %s: %v: %s", to, err, out)
		}
		if j := c.job(id); j.State != "running" || j.Node != to {
			t.Fatalf("after migrating to %s: %s on %s", to, j.State, j.Node)
		}
	}
}
