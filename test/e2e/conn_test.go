package e2e

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"roam/internal/agent/limits"
	"roam/internal/emu"
)

// connFlood opens n connections with Python's socket module and holds
// them: argv[1] is "unix PATH" or "tcp HOST PORT SRC1,SRC2,..."; a
// process opens n (given as argv[2]) from each source address in a child
// of its own (a process's descriptors are bounded by its RLIMIT_NOFILE),
// or n from one process for the unix socket, whose connects block while
// the agent's backlog is full (with a time-out they fail with EAGAIN).
// The last source address's process keeps its n open: each the agent
// closes, it opens again. Each process prints "held
// OK ERR" once its connects are done, then holds them until its standard
// input closes (or, in a job, until it is killed).
const connFlood = `import os, resource, selectors, socket, sys, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
kind, n = sys.argv[1], int(sys.argv[2])
def flood(make, addr):
    held, ok, err = [], 0, 0
    for i in range(n):
        try:
            s = make(); s.settimeout(30 if kind == "tcp" else None); s.connect(addr); held.append(s); ok += 1
        except OSError:
            err += 1
    os.write(1, ("held %d %d\n" % (ok, err)).encode())  # one write: 21 processes share the file
    return held
if kind == "unix":
    held = flood(lambda: socket.socket(socket.AF_UNIX), sys.argv[3])
    sys.stdin.read()
    sys.exit(0)
def keep(held, make, addr):
    sel = selectors.DefaultSelector()
    for s in held:
        sel.register(s, selectors.EVENT_READ)
    while True:
        for key, _ in sel.select(1.0):
            s = key.fileobj; sel.unregister(s); s.close()
            try:
                s = make(); s.connect(addr); sel.register(s, selectors.EVENT_READ)
            except OSError:
                pass
        time.sleep(0.05)
kids = []
srcs = sys.argv[5].split(",")
for i, src in enumerate(srcs):
    pid = os.fork()
    if pid == 0:
        def make(src=src):
            s = socket.socket(); s.bind((src, 0)); s.settimeout(30); return s
        addr = (sys.argv[3], int(sys.argv[4]))
        held = flood(make, addr)
        if i == len(srcs) - 1:
            keep(held, make, addr)
        time.sleep(3600)
        os._exit(0)
    kids.append(pid)
for pid in kids:
    os.waitpid(pid, 0)
`

// Issue 45's bounded connections, on real agents: a user's 20,000 idle
// connections to node 2's socket (from 4 processes), and a job's 21,000
// to node 2's peer port (from 20 extra addresses of node 1, more than
// the strangers' total holds, and from node 1's own; a process each).
// While they are held, node 2's agent holds no more descriptors than its
// caps allow (limits' defaults), refuses the rest, and still answers
// another user's roam ps and takes a migration of another job; after
// they close, its descriptors come back down.
func TestConnectionFloodsAreBounded(t *testing.T) {
	c := upCluster(t, "e2econn", 83, "--nodes", "2", "--scheduler", "static") // only the test moves a job
	c.waitAllAlive(2)
	st, err := emu.Load(c.name)
	if err != nil {
		t.Fatal(err)
	}
	pid := st.Nodes[1].PID
	var srcs []string
	for i := 201; i <= 220; i++ {
		srcs = append(srcs, fmt.Sprintf("198.18.83.%d", i))
		if out, err := exec.Command("ip", "-n", st.Nodes[0].Netns, "addr", "add", srcs[len(srcs)-1]+"/24", "dev", "eth0").CombinedOutput(); err != nil {
			t.Fatalf("ip addr add: %v: %s", err, out)
		}
	}
	// The job floods from its node's own address too: node 1's agent
	// shares it, and gets its connections in past the job's silent ones.
	srcs = append(srcs, st.Nodes[0].Addr)
	// The job that moves while the floods are held.
	mover := c.start("1", "python3", "-c", "import time\nfor i in range(600):\n print(i, flush=True); time.sleep(0.1)\n")
	c.waitLines(mover, 2)

	base := countFDs(t, pid)
	refusedBefore := c.stats("2").ConnRefused
	var most atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			if n, err := fdCount(pid); err == nil && int64(n) > most.Load() {
				most.Store(int64(n))
			}
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	defer func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
	}()

	// The job's flood of node 2's peer port, from node 1's netns.
	start := time.Now()
	flood := c.start("1", "python3", "-c", connFlood, "tcp", "1000", st.Nodes[1].Addr, "7947", strings.Join(srcs, ","))
	// The user's flood of node 2's socket, 4 processes of 5,000.
	var users []*exec.Cmd
	var heldLines atomic.Int64
	for range 4 {
		cmd := exec.Command("/usr/bin/python3", "-c", connFlood, "unix", "5000", st.Nodes[1].Socket)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: jobUser.uid, Gid: jobUser.gid, Groups: jobUser.groups}}
		stdin, _ := cmd.StdinPipe()
		out, _ := cmd.StdoutPipe()
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		users = append(users, cmd)
		t.Cleanup(func() { stdin.Close(); cmd.Process.Kill(); cmd.Wait() })
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if f := strings.Fields(sc.Text()); len(f) == 3 && f[0] == "held" && f[1] == "5000" {
					heldLines.Add(1)
				} else {
					t.Errorf("a flood of the socket: %q", sc.Text())
				}
			}
			io.Copy(io.Discard, out)
		}()
	}
	waitFor(t, time.Minute, "both floods held", func() (bool, string) {
		logs, _ := c.run("--node", "1", "logs", flood)
		return heldLines.Load() == 4 && strings.Count(logs, "held 1000 0\n") == len(srcs),
			fmt.Sprintf("socket: %d of 4 processes; peer port: %q", heldLines.Load(), logs)
	})
	held := time.Since(start)

	// Another user is answered, and a job moves to the flooded node.
	if out, err := c.as(70702, 70702, "--node", "2", "ps").CombinedOutput(); err != nil {
		t.Fatalf("another user's roam ps on node 2 during the floods: %v: %s", err, out)
	}
	moveStart := time.Now()
	c.mustRun("--node", "1", "migrate", mover, "2")
	if j := c.job(mover); j.Node != "2" || j.State != "running" {
		t.Fatalf("the job moved during the floods: %s on %s", j.State, j.Node)
	}
	moved := time.Since(moveStart)
	close(stop)
	<-sampled

	l := limits.Default()
	// The caps' bound: the user's on the socket, the strangers' on the
	// peer port (the job's extra addresses are no member's), node 1's
	// address's own, and the agent's own beside (the migration's, ps's,
	// CRIU's).
	const slack = 200
	bound := base + l.ConnectionsPerUser + min(l.PeerConnections, (len(srcs)-1)*l.PeerConnectionsPerAddress) + l.PeerConnectionsPerAddress + slack
	refused := c.stats("2").ConnRefused - refusedBefore
	t.Logf("node 2's agent: %d descriptors before, at most %d during the floods (bound %d); %d connections refused; floods held after %v; the move took %v",
		base, most.Load(), bound, refused, held.Round(time.Millisecond), moved.Round(time.Millisecond))
	if int(most.Load()) > bound {
		t.Errorf("node 2's agent held %d descriptors during the floods, past the caps' bound of %d", most.Load(), bound)
	}
	// A place whose stranger sent nothing is given back after
	// server.first_request_timeout, and taken again by the floods if
	// they still come: each place once, and once more each such time
	// the floods took.
	rounds := 1 + int(held/limits.DefaultServer().FirstRequestTimeout)
	if least := int64(40000 - rounds*(l.ConnectionsPerUser+l.PeerConnections)); refused < least {
		t.Errorf("node 2 refused %d of the floods' 40,000 connections, want at least %d", refused, least)
	}

	// Closed, the descriptors come back down.
	c.mustRun("--node", "1", "kill", "-s", "KILL", flood)
	for _, u := range users {
		u.Process.Kill()
	}
	waitFor(t, 30*time.Second, "node 2's descriptors back down", func() (bool, string) {
		n, _ := fdCount(pid)
		return n <= base+20, fmt.Sprintf("%d, %d before", n, base)
	})
	c.mustRun("--node", "1", "kill", "-s", "KILL", mover)
}

// fdCount is how many descriptors process pid holds.
func fdCount(pid int) (int, error) {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	return len(ents), err
}

func countFDs(t *testing.T, pid int) int {
	t.Helper()
	n, err := fdCount(pid)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
