package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"roam/internal/api"
	"roam/internal/emu"
)

// The chaos run's faults, each as the e2e tests inject it once
// (test/e2e/migrate_crash_test.go kills an agent mid-migration and starts
// it again, fence_test.go cuts a link, records_test.go fills a node's
// state tmpfs), here at random points and many times over.

// agentPID is node i's agent's pid now (a restart changes it).
func (x *chaos) agentPID(i int) (int, error) {
	st, err := emu.Load(x.spec.Name)
	if err != nil {
		return 0, err
	}
	return st.Nodes[i].PID, nil
}

// waitWhole waits until every node sees every node alive.
func (x *chaos) waitWhole() error {
	deadline := time.Now().Add(time.Minute)
	for {
		whole := true
		for i := range x.root {
			var ns []api.NodeInfo
			if x.root[i].Get(api.PathNodes, &ns) != nil || countAlive(ns) != len(x.root) {
				whole = false
			}
		}
		if whole {
			return nil
		}
		if time.Now().After(deadline) {
			return x.violation("the membership is not whole a minute after the fault ended")
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// migrateBeside starts a migration of a running job off node id, or onto
// it, and returns where its outcome arrives (nil when no job runs).
func (x *chaos) migrateBeside(id string) (*chaosJob, chan error) {
	j := x.pickJob()
	if j == nil {
		return nil, nil
	}
	to := id
	if j.rec.Node == id {
		to = x.otherNode(id)
	}
	done := make(chan error, 1)
	go func() { done <- x.migrate(j, to, false) }()
	return j, done
}

// faultKill kills a node's agent with SIGKILL, half the time while a
// migration from or to it dumps, and starts it again (roam cluster start).
func (x *chaos) faultKill() error {
	// A restarted agent fences its jobs from the reach it kept, and the
	// other nodes the jobs of its home: one whose only checkpoint is its
	// owner's file may be killed by its fence, and its owner restarts it
	// (ownerDecision).
	i := x.rng.IntN(len(x.st.Nodes))
	id, during := x.st.Nodes[i].ID, x.rng.IntN(2) == 0
	x.note("agent-kill of node %s, mid-migration %v", id, during)
	pid, err := x.agentPID(i)
	if err != nil {
		return err
	}
	var done chan error
	if during {
		var j *chaosJob
		if j, done = x.migrateBeside(id); j != nil {
			// Killed once the job is frozen for its dump, or after 3 s.
			waitCond(3*time.Second, func() bool {
				cps, _ := x.copies()
				for _, c := range cps[j.id] {
					if c.State == 'T' || c.State == 't' {
						return true
					}
				}
				return false
			})
		}
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill node %s's agent: %w", id, err)
	}
	x.res.Faults["agent-kill"]++
	if done != nil {
		x.count(<-done)
	}
	waitCond(10*time.Second, func() bool { _, err := os.Stat("/proc/" + strconv.Itoa(pid)); return err != nil })
	time.Sleep(time.Duration(x.rng.IntN(2000)) * time.Millisecond) // down a while
	if _, err := emu.Start(x.spec.Name, id, x.spec.Roamd); err != nil {
		return x.violation("roam cluster start %s: %v", id, err)
	}
	return x.waitWhole()
}

// faultCut cuts a node's link and heals it: short (under the fence's
// lease: nothing fences) two times in three, else long (past its kill and
// margin: the node fences its checkpointed jobs, their homes restart them
// elsewhere, or their owners from their files). A migration off the node is tried during the cut.
func (x *chaos) faultCut() error {
	id := x.st.Nodes[x.rng.IntN(len(x.st.Nodes))].ID
	d := time.Duration(500+x.rng.IntN(2000)) * time.Millisecond
	if x.rng.IntN(3) == 0 && !x.spec.ShortCuts {
		d = 14 * time.Second
	}
	x.note("link-cut of node %s for %v", id, d)
	if err := emu.SetLink(x.spec.Name, id, false); err != nil {
		return err
	}
	x.res.Faults["link-cut"]++
	cut := time.Now()
	_, done := x.migrateBeside(id)
	time.Sleep(d - time.Since(cut)) // the cut's length is the schedule's
	if err := emu.SetLink(x.spec.Name, id, true); err != nil {
		return err
	}
	if done != nil {
		x.count(<-done)
	}
	return x.waitWhole()
}

// faultFill fills a node's state directory (its tmpfs) to the last byte,
// tries a migration onto or off it and a checkpoint of a job while it is
// full, and frees it.
func (x *chaos) faultFill() error {
	i := x.rng.IntN(len(x.st.Nodes))
	id := x.st.Nodes[i].ID
	x.note("disk-full on node %s", id)
	fill := filepath.Join(x.st.Nodes[i].Dir, "chaos-fill")
	f, err := os.Create(fill)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	for k := 0; k <= x.spec.StateMB+1; k++ {
		if _, err = f.Write(buf); err != nil {
			break
		}
	}
	f.Close()
	defer os.Remove(fill)
	if !errors.Is(err, syscall.ENOSPC) {
		return fmt.Errorf("filling node %s's state directory: %v, not ENOSPC", id, err)
	}
	x.res.Faults["disk-full"]++
	if _, done := x.migrateBeside(id); done != nil {
		x.count(<-done)
	}
	if j := x.pickJob(); j != nil {
		if err := x.saveOwner(j, false); err != nil {
			fmt.Fprintf(x.progress, "chaos: checkpoint of %s with node %s full: %v\n", j.id, id, err)
		}
	}
	time.Sleep(time.Duration(500+x.rng.IntN(1500)) * time.Millisecond) // periodic checkpoints meet it too
	return os.Remove(fill)
}

// faultCRIU kills CRIU with SIGKILL in the middle of a dump: a migration
// (or, one time in three, a checkpoint) of a job runs, and the first criu
// process under its node's agent is killed. When the dump ends before a
// criu is seen, the step was a migration, and no fault is counted.
func (x *chaos) faultCRIU() error {
	j := x.pickJob()
	if j == nil {
		x.note("criu-kill: no job running")
		return nil
	}
	ckptOnly := x.rng.IntN(3) == 0
	x.note("criu-kill on node %s (%s, checkpoint %v)", j.rec.Node, j.id, ckptOnly)
	pid, err := x.agentPID(x.node(j.rec.Node))
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	if ckptOnly {
		go func() { done <- x.saveOwner(j, false) }()
	} else {
		to, lazy := x.otherNode(j.rec.Node), x.rng.IntN(4) == 0
		go func() { done <- x.migrate(j, to, lazy) }()
	}
	var err2 error
	for killed := false; ; {
		select {
		case err2 = <-done:
			if !ckptOnly {
				x.count(err2)
			}
			if !killed {
				fmt.Fprintf(x.progress, "chaos: no criu seen before the dump ended\n")
			}
			return nil
		default:
		}
		if c := criuUnder(pid); !killed && c > 0 && syscall.Kill(c, syscall.SIGKILL) == nil {
			killed = true
			x.res.Faults["criu-kill"]++
		}
		time.Sleep(time.Millisecond)
	}
}

// criuUnder finds a criu process among agent's descendants (up to three
// generations down), or 0.
func criuUnder(agent int) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, ppid := commPPid(pid)
		if comm != "criu" {
			continue
		}
		for gen := 0; gen < 3 && ppid > 1; gen++ {
			if ppid == agent {
				return pid
			}
			_, ppid = commPPid(ppid)
		}
	}
	return 0
}

// commPPid is a process's name and parent.
func commPPid(pid int) (string, int) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0
	}
	s := string(b)
	i, k := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if i < 0 || k < i {
		return "", 0
	}
	f := strings.Fields(s[k+1:])
	if len(f) < 2 {
		return "", 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return s[i+1 : k], ppid
}

// waitCond polls cond every 2 ms until it holds or d passes.
func waitCond(d time.Duration, cond func() bool) {
	deadline := time.Now().Add(d)
	for !cond() && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
}
