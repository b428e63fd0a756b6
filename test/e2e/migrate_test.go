package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"roam/internal/api"
	"roam/internal/cgroup"
	"roam/internal/ckpt"
	"roam/internal/emu"
	"roam/internal/procfs"
)

// migjob builds workloads/migjob.c once into the test's bin directory.
func migjob(t *testing.T) string { return workload(t, "migjob") }

// copies lists the live copies of job id, with their states ('X' for a
// copy that is killed and can never run the program again): those of this
// test program's clusters, or of no emulated cluster (deploy's).
func copies(id string) (pids []int, states []byte) {
	for pid, spool := range ckpt.Inits() {
		if !strings.HasSuffix(spool, "/spool/"+id) {
			continue
		}
		if name, ok := emuCluster(spool); ok {
			if _, mine := ours.Load(name); !mine {
				continue
			}
		}
		st, err := procfs.ReadStat(pid)
		if err != nil || st.State == 'Z' {
			continue
		}
		pids = append(pids, pid)
		if st.Flags&procfs.PFExiting != 0 || killPending(pid) {
			st.State = 'X'
		}
		states = append(states, st.State)
	}
	return pids, states
}

// emuCluster names the emulated cluster a job's spool directory is of.
func emuCluster(spool string) (string, bool) {
	rest, ok := strings.CutPrefix(spool, emu.BaseDir+"/")
	if !ok {
		return "", false
	}
	name, _, _ := strings.Cut(rest, "/")
	return name, true
}

// live reports whether pid is still a copy that can run: present, not a
// zombie, not exiting, no SIGKILL pending.
func live(pid int) bool {
	st, err := procfs.ReadStat(pid)
	if err != nil || st.State == 'Z' || st.Flags&procfs.PFExiting != 0 || killPending(pid) {
		return false
	}
	return true
}

// roamInits describes every roam-init process, for a failure message.
func roamInits() string {
	var out []string
	for pid, spool := range ckpt.Inits() {
		if spool == "" {
			spool = "?"
		}
		out = append(out, strconv.Itoa(pid)+":"+spool)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}

// killPending reports whether pid has a SIGKILL pending: it is dying (it
// may show as runnable while it waits for a CPU to die on).
func killPending(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "ShdPnd:"); ok {
			if m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && m&(1<<8) != 0 {
				return true
			}
		}
		if v, ok := strings.CutPrefix(l, "SigPnd:"); ok {
			if m, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && m&(1<<8) != 0 {
				return true
			}
		}
	}
	return false
}

// copyWatch checks, every few milliseconds until stopped, how many copies
// of a job exist. strict: exactly one at every check. Otherwise at least
// one, and at most one that can run: not stopped (a migration holds the
// source's stopped copy beside the destination's, and a lazy one until the
// last page has moved) and not exiting (the source's copy, killed, frees
// its memory after the destination's runs).
type copyWatch struct {
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	bad    []string
	checks int
}

func watchCopies(id string, strict bool) *copyWatch {
	w := &copyWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(5 * time.Millisecond):
			}
			pids, states := copies(id)
			if len(pids) == 0 {
				// A copy CRIU is restoring shows as a roam-init whose
				// spool cannot be read yet (its mounts not yet made):
				// look again before counting none.
				time.Sleep(50 * time.Millisecond)
				pids, states = copies(id)
			}
			running := 0
			for _, s := range states {
				if s != 'T' && s != 't' && s != 'X' {
					running++
				}
			}
			if running > 1 {
				// A copy CRIU has just killed (a lazy source whose last
				// page has gone) is runnable between the SIGKILL that
				// wakes it and the exit that marks it, and that step can
				// fall between the two reads of copies. Look again: a
				// copy that is dying by then was already killed; two
				// copies that both go on running are the fault.
				time.Sleep(20 * time.Millisecond)
				running = 0
				for i, pid := range pids {
					if s := states[i]; s == 'T' || s == 't' || s == 'X' {
						continue
					}
					if live(pid) {
						running++
					}
				}
			}
			w.mu.Lock()
			w.checks++
			if (strict && len(pids) != 1) || len(pids) < 1 || running > 1 {
				w.bad = append(w.bad, fmt.Sprintf("%s copies %v states %q (roam-inits: %s)", time.Now().Format("15:04:05.000"), pids, states, roamInits()))
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// end stops the watch and fails the test on a violation.
func (w *copyWatch) end(t *testing.T) {
	t.Helper()
	close(w.stop)
	<-w.done
	if len(w.bad) > 0 {
		t.Fatalf("copies of the job, %d bad checks of %d, first: %v", len(w.bad), w.checks, w.bad[:min(len(w.bad), 5)])
	}
	t.Logf("copies checked %d times", w.checks)
}

func (c *cluster) job(id string) api.Job {
	c.t.Helper()
	j, ok := c.lookup(id)
	if !ok {
		c.t.Fatalf("job %s not in ps", id)
	}
	return j
}

// lookup finds job id in node 1's ps (which leaves out a home node it does
// not see alive).
func (c *cluster) lookup(id string) (api.Job, bool) {
	c.t.Helper()
	for _, j := range c.ps("1", "-a") {
		if j.ID == id {
			return j, true
		}
	}
	return api.Job{}, false
}

func (c *cluster) lines(id string) int {
	out, _ := c.run("--node", "1", "logs", id)
	return strings.Count(out, "\n")
}

// waitLines waits until job id has printed at least n lines.
func (c *cluster) waitLines(id string, n int) {
	c.t.Helper()
	waitFor(c.t, 60*time.Second, fmt.Sprintf("%s prints %d lines", id, n), func() (bool, string) {
		got := c.lines(id)
		return got >= n, strconv.Itoa(got)
	})
}

func (c *cluster) waitFinished(id string, d time.Duration) api.Job {
	c.t.Helper()
	var j api.Job
	waitFor(c.t, d, id+" finished", func() (bool, string) {
		var ok bool
		if j, ok = c.lookup(id); !ok {
			return false, "not in ps (its home is not seen alive)"
		}
		return j.State == "finished", j.State + " on " + j.Node
	})
	return j
}

// start starts argv on node as the job user, detached, and returns its id.
func (c *cluster) start(node string, argv ...string) string {
	c.t.Helper()
	return c.startAs(jobUser, node, argv...)
}

// startAs starts argv on node as o, detached, and returns its id.
func (c *cluster) startAs(o owner, node string, argv ...string) string {
	c.t.Helper()
	cmd := c.roamAs(o, append([]string{"--node", "1", "run", "-d", "--on", node}, argv...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		c.t.Fatalf("run %v: %v: %s", argv, err, out)
	}
	return strings.TrimSpace(string(out))
}

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:8]) }

func marker(t *testing.T) string { return fmt.Sprintf("m%d", time.Now().UnixNano()) }

// A migration kind: the argv of the migrated job and of its control run,
// and, when it writes a file, the two files to compare.
type kind struct {
	name       string
	argv       func(mark, file string) []string
	every      int // lines to wait for between hops
	file       bool
	lazy       bool
	finishWait time.Duration
}

// Each kind migrates 1→2→3→1 while it runs; output, file content and exit
// status must equal those of an unmigrated run of the same program, and
// every hop must be in the job's migration log.
func TestMigrationThreeHops(t *testing.T) {
	prog := migjob(t)
	c := upCluster(t, "e2emig", 18, "--nodes", "3", "--cpu", "0.6,0.6,0.6")
	c.waitAllAlive(3)
	tree := "for i in $(seq 1 60); do echo \"$i $(echo $i | md5sum)\"; sleep 0.05; done; exit 3"
	kinds := []kind{
		{name: "cpu", every: 8, argv: func(m, _ string) []string { return []string{prog, "cpu", "90", m} }},
		{name: "threads", every: 8, argv: func(m, _ string) []string { return []string{prog, "threads", "90", m} }},
		{name: "tree", every: 6, argv: func(m, _ string) []string { return []string{"sh", "-c", tree, m} }},
		{name: "file", every: 8, file: true, argv: func(m, f string) []string { return []string{prog, "file", "80", m, f} }},
		{name: "mem1g", every: 4, argv: func(m, _ string) []string { return []string{prog, "mem", "60", m, "1024"} }},
		{name: "cpu-lazy", lazy: true, every: 8, argv: func(m, _ string) []string { return []string{prog, "cpu", "90", m} }},
		{name: "mem1g-lazy", lazy: true, every: 4, argv: func(m, _ string) []string { return []string{prog, "mem", "60", m, "1024"} }},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			c.t = t
			threeHops(t, c, k)
		})
	}
	c.t = t
	// Every node's CRIU kept what it learnt of the kernel, so the restores
	// above did not probe it again while their jobs were stopped.
	for id, pid := range c.agentPIDs() {
		kdat := fmt.Sprintf("/proc/%d/root%s/criu.kdat", pid, ckpt.KerndatDir)
		if fi, err := os.Stat(kdat); err != nil || fi.Size() == 0 {
			t.Errorf("node %s: CRIU's kernel facts are not cached (%s: %v)", id, kdat, err)
		}
	}
}

func threeHops(t *testing.T, c *cluster, k kind) {
	// Both jobs are the job user's, and so is the directory of their files.
	dir := userDir(t)
	fileA, fileB := filepath.Join(dir, "a.dat"), filepath.Join(dir, "b.dat")
	markA, markB := marker(t)+"a", marker(t)+"b"

	// The migrated job runs attached, as a user would have it: its output
	// must keep streaming to this roam run, and its status come back.
	attached := c.roamAs(jobUser, append([]string{"--node", "1", "run", "--on", "1"}, k.argv(markA, fileA)...)...)
	var out bytes.Buffer
	attached.Stdout = &out
	if err := attached.Start(); err != nil {
		t.Fatal(err)
	}
	idB := c.start("2", k.argv(markB, fileB)...)
	var idA string
	waitFor(t, 10*time.Second, "the attached job", func() (bool, string) {
		for _, j := range c.ps("1", "-a") {
			if strings.Contains(j.Cmd, markA) && j.State == "running" {
				idA = j.ID
				return true, ""
			}
		}
		return false, ""
	})
	// A failed kind must not leave its jobs running into the next one,
	// whose placement and balancing they would change.
	t.Cleanup(func() {
		if t.Failed() {
			c.roamCmd("--node", "1", "kill", "-s", "KILL", idA).Run()
			c.roamCmd("--node", "1", "kill", "-s", "KILL", idB).Run()
			attached.Wait()
		}
	})
	w := watchCopies(idA, false)
	// A lazy migration's pages never pass through a port a process on
	// either node could connect to (docs/security.md).
	var lw *listenWatch
	if k.lazy {
		lw = watchListeners(c.agentPIDs())
	}
	hops := []string{"2", "3", "1"}
	args := []string{"--node", "1", "migrate"}
	if k.lazy {
		args = append(args, "--lazy")
	}
	for i, to := range hops {
		c.waitLines(idA, (i+1)*k.every)
		c.mustRun(append(args, idA, to)...)
		j := c.job(idA)
		if j.Node != to || j.Migrations != i+1 {
			t.Fatalf("after hop %d: node %s, %d migrations; want %s, %d", i+1, j.Node, j.Migrations, to, i+1)
		}
		pids, _ := copies(idA)
		if len(pids) != 1 {
			t.Fatalf("after hop %d: %d copies (%v)", i+1, len(pids), pids)
		}
	}
	// It keeps running on node 1 after the third hop.
	c.waitLines(idA, 4*k.every)
	w.end(t)
	if lw != nil {
		lw.end(t)
	}
	codeA := exitCodeOf(attached.Wait())
	jA := c.waitFinished(idA, 2*time.Minute)
	jB := c.waitFinished(idB, 2*time.Minute)
	logsA, logsB := c.mustRun("--node", "1", "logs", idA), c.mustRun("--node", "1", "logs", idB)
	if logsA != logsB || sum([]byte(logsA)) != sum([]byte(logsB)) {
		t.Fatalf("output differs from the unmigrated run:\nmigrated:\n%s\nunmigrated:\n%s", logsA, logsB)
	}
	if out.String() != logsB {
		t.Fatalf("the attached roam run printed %d bytes, the unmigrated run %d", out.Len(), len(logsB))
	}
	if *jA.ExitCode != *jB.ExitCode || codeA != *jB.ExitCode {
		t.Fatalf("exit: migrated %d (roam run %d), unmigrated %d", *jA.ExitCode, codeA, *jB.ExitCode)
	}
	if k.file {
		a, errA := os.ReadFile(fileA)
		b, errB := os.ReadFile(fileB)
		if errA != nil || errB != nil || len(a) == 0 || sum(a) != sum(b) {
			t.Fatalf("file differs: %v %v, %d vs %d bytes", errA, errB, len(a), len(b))
		}
	}
	if jA.UID != jobUser.uid {
		t.Fatalf("the migrated job is uid %d's, want the job user's (%d)", jA.UID, jobUser.uid)
	}
	if len(jA.MigrationLog) != 3 {
		t.Fatalf("migration log: %+v", jA.MigrationLog)
	}
	from := "1"
	for i, m := range jA.MigrationLog {
		if !m.OK || m.From != from || m.To != hops[i] || m.Bytes <= 0 || m.FreezeMS <= 0 || m.TotalMS < m.FreezeMS || m.Lazy != k.lazy {
			t.Fatalf("migration %d: %+v", i+1, m)
		}
		if k.lazy && m.WindowMS <= 0 {
			t.Fatalf("lazy migration %d has no post-copy window: %+v", i+1, m)
		}
		from = m.To
		t.Logf("hop %d: %s->%s %.1f MiB freeze %.0f ms (dump %.0f, copy %.0f, restore %.0f) total %.0f ms window %.0f ms",
			i+1, m.From, m.To, float64(m.Bytes)/(1<<20), m.FreezeMS, m.DumpMS, m.CopyMS, m.RestoreMS, m.TotalMS, m.WindowMS)
	}
	t.Logf("%s: %d lines, exit %d, sha %s", k.name, strings.Count(logsA, "\n"), codeA, sum([]byte(logsA)))
}

// A signal reaches a migrated job, and `roam run` returns its status.
func TestSignalAfterMigration(t *testing.T) {
	c := upCluster(t, "e2esig", 20, "--nodes", "2")
	c.waitAllAlive(2)
	attached := c.roamCmd("--node", "1", "run", "--on", "1", "sleep", "120")
	if err := attached.Start(); err != nil {
		t.Fatal(err)
	}
	var id string
	waitFor(t, 10*time.Second, "sleep running", func() (bool, string) {
		js := c.ps("1")
		if len(js) == 1 && js[0].State == "running" {
			id = js[0].ID
			return true, ""
		}
		return false, ""
	})
	c.mustRun("--node", "2", "migrate", id, "2")
	c.mustRun("--node", "1", "kill", "-s", "TERM", id)
	if code := exitCodeOf(attached.Wait()); code != 143 {
		t.Fatalf("roam run exited %d, want 143 (SIGTERM)", code)
	}
	if j := c.job(id); j.ExitCode == nil || *j.ExitCode != 143 || j.Node != "2" {
		t.Fatalf("job after kill: %+v", j)
	}
}

// Failures during the transfer leave the job running at the source, with
// exactly one copy at every check, and the job's record saying why.
func TestMigrationFailuresKeepTheJob(t *testing.T) {
	prog := migjob(t)
	c := upCluster(t, "e2efail", 19, "--nodes", "3", "--cpu", "0.6,0.6,0.6")
	c.waitAllAlive(3)
	mark := marker(t)
	argv := func(m string) []string { return []string{prog, "mem", "450", m, "768"} }
	id := c.start("1", argv(mark+"a")...)
	control := c.start("3", argv(mark+"b")...)
	c.waitLines(id, 2)
	w := watchCopies(id, true)
	imageDir := emu.ImageDir("e2efail")

	// fail migrates the job to node `to`, runs sabotage once the image
	// stream reaches the destination, and checks the migration failed
	// with an error mentioning want.
	fail := func(to string, sabotage func(), want string) {
		t.Helper()
		before := c.lines(id)
		mig := c.roamCmd("--node", "1", "migrate", id, to)
		var errOut bytes.Buffer
		mig.Stderr = &errOut
		if err := mig.Start(); err != nil {
			t.Fatal(err)
		}
		if sabotage != nil {
			waitFor(t, 60*time.Second, "images arriving at node "+to, func() (bool, string) {
				m, _ := filepath.Glob(filepath.Join(imageDir, "n"+to, "in-*", "*"))
				return len(m) > 0, ""
			})
			sabotage()
		}
		if err := mig.Wait(); err == nil {
			t.Fatalf("migration to %s succeeded; it should have failed", to)
		}
		// CRIU's messages say "No space", Go's "no space".
		if !strings.Contains(strings.ToLower(errOut.String()), want) {
			t.Fatalf("migration error %q does not mention %q", errOut.String(), want)
		}
		j := c.job(id)
		last := j.MigrationLog[len(j.MigrationLog)-1]
		if j.Node != "1" || j.State != "running" || last.OK || last.To != to || !strings.Contains(strings.ToLower(last.Error), want) {
			t.Fatalf("after the failed migration: node %s state %s, last %+v", j.Node, j.State, last)
		}
		// It goes on at the source, back in node 1's CPU group, out of
		// which the dump took it (cgroup v1).
		c.waitLines(id, before+3)
		if layout, err := cgroup.Detect(); err == nil && !layout.V2 {
			ps, _ := copies(id)
			for _, p := range ps {
				for _, q := range procfs.Tree(p) {
					if g := procGroups(q)["cpu"]; g != "/roam/e2efail/n1" {
						t.Fatalf("after the failed migration, process %d of %s is in cpu group %q", q, id, g)
					}
				}
			}
		}
		t.Logf("failed as wanted: %s", strings.TrimSpace(errOut.String()))
	}

	t.Run("destination agent killed", func(t *testing.T) {
		c.t = t
		pid := c.status().Nodes[1].PID
		fail("2", func() { syscall.Kill(pid, syscall.SIGKILL) }, "")
		c.mustRun("cluster", "start", "2")
		c.waitAllAlive(3)
	})
	t.Run("destination out of space", func(t *testing.T) {
		c.t = t
		// A small filesystem over node 2's images, in node 2's own mount
		// namespace (where its agent and CRIU see it).
		images := filepath.Join(imageDir, "n2")
		os.MkdirAll(images, 0o700)
		inNode2 := func(args ...string) *exec.Cmd {
			ns := fmt.Sprintf("--mount=/proc/%d/ns/mnt", c.status().Nodes[1].PID)
			return exec.Command("nsenter", append([]string{ns}, args...)...)
		}
		if out, err := inNode2("mount", "-t", "tmpfs", "-o", "size=4m", "roam-e2e-full", images).CombinedOutput(); err != nil {
			t.Fatalf("mount: %v %s", err, out)
		}
		unmount := func() { inNode2("umount", "-l", images).Run() }
		t.Cleanup(unmount)
		fail("2", nil, "no space left on device")
		unmount()
	})
	t.Run("destination link down", func(t *testing.T) {
		c.t = t
		ns := "roam-e2efail-3"
		t.Cleanup(func() { exec.Command("ip", "-n", ns, "link", "set", "eth0", "up").Run() })
		fail("3", func() {
			if out, err := exec.Command("ip", "-n", ns, "link", "set", "eth0", "down").CombinedOutput(); err != nil {
				t.Fatalf("link down: %v %s", err, out)
			}
		}, "stalled")
		exec.Command("ip", "-n", ns, "link", "set", "eth0", "up").Run()
		// The partition made the others declare node 3 dead; it rejoins.
		up := time.Now()
		waitFor(t, 60*time.Second, "node 3 back", func() (bool, string) {
			a := alive(c.nodes("1"))
			return len(a) == 3, fmt.Sprint(a)
		})
		t.Logf("node 3 alive again %v after its link came up", time.Since(up).Round(100*time.Millisecond))
	})
	c.t = t
	w.end(t)
	jA := c.waitFinished(id, 3*time.Minute)
	jB := c.waitFinished(control, 3*time.Minute)
	a, b := c.mustRun("--node", "1", "logs", id), c.mustRun("--node", "1", "logs", control)
	if a != b || *jA.ExitCode != 0 || *jB.ExitCode != 0 {
		t.Fatalf("after the failures: exit %v vs %v, output same: %v", *jA.ExitCode, *jB.ExitCode, a == b)
	}
	if jA.Migrations != 0 || len(jA.MigrationLog) != 3 {
		t.Fatalf("record: %d migrations, log %+v", jA.Migrations, jA.MigrationLog)
	}
}

// A job holding a TCP connection to a host outside the cluster is
// reported pinned, with the reason, and keeps running where it is.
func TestOutsideConnectionPins(t *testing.T) {
	c := upCluster(t, "e2epin", 21, "--nodes", "2")
	c.waitAllAlive(2)
	ln, err := net.Listen("tcp", "198.18.21.254:0") // the host side of the cluster's bridge
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	script := fmt.Sprintf("exec 3<>/dev/tcp/198.18.21.254/%d; for i in $(seq 1 40); do echo $i; sleep 0.1; done", port)
	id := c.start("1", "bash", "-c", script)
	c.waitLines(id, 2)
	pidsBefore, _ := copies(id)
	out, err := c.run("--node", "1", "migrate", id, "2")
	want := fmt.Sprintf("TCP connection to 198.18.21.254:%d (outside the cluster)", port)
	if err == nil || !strings.Contains(out, want) {
		t.Fatalf("migrate: err %v, output %q; want an error with %q", err, out, want)
	}
	long := c.mustRun("--node", "1", "ps", "-l", "-a")
	if !strings.Contains(long, "pinned: holds a TCP connection to 198.18.21.254") {
		t.Fatalf("ps -l does not show the pin:\n%s", long)
	}
	j := c.job(id)
	if j.Node != "1" || j.State != "running" || !strings.Contains(j.PinReason, want) {
		t.Fatalf("job: %+v", j)
	}
	pidsAfter, _ := copies(id)
	if len(pidsBefore) != 1 || fmt.Sprint(pidsBefore) != fmt.Sprint(pidsAfter) {
		t.Fatalf("the job's process changed: %v -> %v", pidsBefore, pidsAfter)
	}
	n := c.lines(id)
	c.waitLines(id, n+3)
	if j := c.waitFinished(id, time.Minute); *j.ExitCode != 0 || c.lines(id) != 40 {
		t.Fatalf("job ended %+v with %d lines", j, c.lines(id))
	}

	// A socket that is not a connection (listening TCP, UDP) does not pin.
	py := "import socket,time\nl=socket.socket(); l.bind(('0.0.0.0',0)); l.listen()\n" +
		"u=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); u.bind(('0.0.0.0',0))\n" +
		"for i in range(40):\n print(i, flush=True); time.sleep(0.1)\n"
	id = c.start("1", "python3", "-c", py)
	c.waitLines(id, 2)
	c.mustRun("--node", "1", "migrate", id, "2")
	if j := c.waitFinished(id, time.Minute); *j.ExitCode != 0 || j.Node != "2" || j.PinReason != "" || c.lines(id) != 40 {
		t.Fatalf("job with listening and UDP sockets: %+v, %d lines", j, c.lines(id))
	}
}

// A user's job runs in a user namespace of its own, owned by root, where
// root's CRIU holds what it needs to dump it even where root lacks
// CAP_SYS_RESOURCE on the host, as here (without it, "Can't get rlimit").
// The agent says so at start (roam stats), and the user's job moves like
// root's, its output and status whole.
func TestUserJobMigrationOnThisHost(t *testing.T) {
	c := upCluster(t, "e2euser", 22, "--nodes", "2")
	c.waitAllAlive(2)
	uid, gid := ensureUser(t, "roamtest1")
	if st := c.stats("1"); !strings.Contains(st.Migration, "users' jobs run in user namespaces of their own") {
		t.Fatalf("roam stats does not say how users' jobs migrate: %q", st.Migration)
	}
	waitFor(t, 30*time.Second, "roam nodes says both nodes run users' jobs in user namespaces", func() (bool, string) {
		ns := c.nodes("1")
		return len(ns) == 2 && ns[0].UserNS && ns[1].UserNS, fmt.Sprint(ns)
	})
	start := c.as(uid, gid, "--node", "1", "run", "-d", "--on", "1", "sh", "-c", "for i in $(seq 1 30); do echo $i $(id -u) $(id -g); sleep 0.1; done")
	out, err := start.CombinedOutput()
	if err != nil {
		t.Fatalf("run as roamtest1: %v %s", err, out)
	}
	id := strings.TrimSpace(string(out))
	c.waitLines(id, 2)
	if out, err := c.as(uid, gid, "--node", "1", "migrate", id, "2").CombinedOutput(); err != nil {
		t.Fatalf("migrate of a user's job: %v %s", err, out)
	}
	j := c.waitFinished(id, time.Minute)
	if *j.ExitCode != 0 || j.Node != "2" || c.lines(id) != 30 {
		t.Fatalf("job ended %+v with %d lines", j, c.lines(id))
	}
	want := fmt.Sprintf(" %d %d", uid, gid)
	logs := c.mustRun("--node", "1", "logs", id)
	for i, l := range strings.Split(strings.TrimSpace(logs), "\n") {
		if l != strconv.Itoa(i+1)+want {
			t.Fatalf("line %d of the moved job: %q, want %q", i+1, l, strconv.Itoa(i+1)+want)
		}
	}
	// A job holding a zombie (a child that exited, never reaped: sleep
	// does not wait) moves: CRIU restores the zombie with its own ids,
	// root of the job's namespace, which the destination's check of the
	// restored tasks must leave out.
	out, err = c.as(uid, gid, "--node", "1", "run", "-d", "--on", "1", "sh", "-c", "(exit 0) & echo up; exec sleep 60").CombinedOutput()
	if err != nil {
		t.Fatalf("run as roamtest1: %v %s", err, out)
	}
	id = strings.TrimSpace(string(out))
	c.waitLines(id, 1)
	if out, err := c.as(uid, gid, "--node", "1", "migrate", id, "2").CombinedOutput(); err != nil {
		t.Fatalf("migrate of a user's job with a zombie: %v %s", err, out)
	}
	if j := c.job(id); j.Node != "2" || j.State != api.StateRunning {
		t.Fatalf("the job with a zombie after its move: %+v", j)
	}
	c.mustRun("--node", "1", "kill", "-s", "KILL", id)
}
