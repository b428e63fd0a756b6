package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"roam/internal/cgroup"
	"roam/internal/emu"
	"roam/internal/procfs"
)

// procGroups maps each controller of pid's cgroup memberships (cpu,
// memory, cpuacct) to its group.
func procGroups(pid int) map[string]string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	out := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		f := strings.SplitN(l, ":", 3)
		if len(f) != 3 {
			continue
		}
		for _, c := range strings.Split(f[1], ",") {
			out[c] = f[2]
		}
		if f[1] == "" {
			out["unified"] = f[2]
		}
	}
	return out
}

// Every job runs in a cgroup of its own under its node's (its memory and
// CPU accounting; its CPU group is the node's), not in the agent's: all
// its processes, on the node it started on and on the node
// it migrated to; `roam ps` reports the group's CPU time and memory
// (pages a forked child shares with its parent counted once, where adding
// up the processes' resident sizes counts them four times); the group of
// a job that moved away or ended is removed.
func TestJobCgroups(t *testing.T) {
	layout, err := cgroup.Detect()
	if err != nil {
		t.Skip(err)
	}
	prog := migjob(t)
	c := upCluster(t, "e2ecg", 32, "--nodes", "2", "--cpu", "0.9,0.9")
	c.waitAllAlive(2)
	const mb = 200
	id := c.start("1", prog, "fork", "100000", marker(t), strconv.Itoa(mb))
	c.waitLines(id, 3)

	// Under v1 the job's own groups are its memory and cpuacct ones; for
	// the CPU it is in its node's group (see cgroup.Jobs.Enter).
	ctrls := []string{"memory"}
	if layout.V2 {
		ctrls = []string{"unified"}
	} else if layout.CPUAcct != "" {
		ctrls = append(ctrls, "cpuacct")
	}
	inGroup := func(node string) {
		t.Helper()
		nodeGroup := fmt.Sprintf("/roam/%s/n%s", c.name, node)
		want := nodeGroup + "/jobs/" + id
		var pids []int
		waitFor(t, 10*time.Second, "the job's processes in "+want, func() (bool, string) {
			ps, _ := copies(id)
			if len(ps) != 1 {
				return false, fmt.Sprintf("copies %v", ps)
			}
			pids = procfs.Tree(ps[0])
			if len(pids) != 5 { // roam-init, migjob and its 3 children
				return false, fmt.Sprintf("tree %v", pids)
			}
			for _, p := range pids {
				g := procGroups(p)
				for _, ctrl := range ctrls {
					if g[ctrl] != want {
						return false, fmt.Sprintf("process %d: %s group %q", p, ctrl, g[ctrl])
					}
				}
				if !layout.V2 && g["cpu"] != nodeGroup {
					return false, fmt.Sprintf("process %d: cpu group %q", p, g["cpu"])
				}
			}
			return true, ""
		})
	}
	usage := func() (cpu, rss float64) {
		t.Helper()
		for _, j := range c.ps("1") {
			if j.ID == id {
				return j.CPUSeconds, j.RSSMB
			}
		}
		t.Fatalf("%s not in ps", id)
		return 0, 0
	}
	groupCPU := func(node string) float64 {
		jobs := &cgroup.Jobs{Layout: layout, Parent: fmt.Sprintf("roam/%s/n%s", c.name, node)}
		cpu, _, ok := jobs.Usage(id)
		if !ok {
			t.Fatalf("no usage counters for %s", jobs.Rel(id))
		}
		return cpu
	}
	// roam ps shows the CPU time the job had on every node it ran on: on
	// the first, its group's count; after a move, what it had before (prior)
	// and what its group here counted since it came, at most the group's
	// whole count (which also holds CRIU's restore, done in the group).
	check := func(node string, prior float64) float64 {
		t.Helper()
		inGroup(node)
		before := groupCPU(node)
		cpu, rss := usage()
		after := groupCPU(node)
		here := cpu - prior
		if (prior == 0 && here < before) || here > after || here < 0 || cpu <= 0 {
			t.Fatalf("on node %s: ps says %.3f CPU seconds, %.3f before it came; the job's group here counted %.3f before and %.3f after", node, cpu, prior, before, after)
		}
		// The tree's resident sizes add up to about 4 × mb.
		if rss < mb*0.9 || rss > mb*2 {
			t.Fatalf("on node %s: ps says %.0f MiB resident for a job whose %d MiB are shared by 4 processes", node, rss, mb)
		}
		t.Logf("node %s: %.2f CPU s, %.0f MiB", node, cpu, rss)
		return cpu
	}
	was := check("1", 0)
	c.mustRun("--node", "1", "migrate", id, "2")
	check("2", was)
	gone := func(node string) {
		t.Helper()
		rel := fmt.Sprintf("roam/%s/n%s/jobs/%s", c.name, node, id)
		waitFor(t, 20*time.Second, "group "+rel+" removed", func() (bool, string) {
			return !layout.Exists(rel), ""
		})
	}
	gone("1")
	c.mustRun("--node", "1", "kill", id)
	c.waitFinished(id, 30*time.Second)
	gone("2")
}

// Every emulated node has its own /tmp and /var/tmp, as separate hosts
// would (roamd's and CRIU's; a job's are its own, TestJobTmpMovesWithIt).
// A job holding a file open outside the shared directories (in /run,
// which no node's config names) is pinned with the reason and runs on.
// The same job with its file in a directory every node shares migrates
// 1 -> 2 -> 1.
func TestNodeLocalFiles(t *testing.T) {
	c := upCluster(t, "e2elocal", 34, "--nodes", "2")
	c.waitAllAlive(2)
	holder := func(file string) string {
		return c.start("1", "sh", "-c", "exec 3>>"+file+"; i=0; while [ $i -lt 50 ]; do i=$((i+1)); echo $i >&3; sleep 0.2; done; wc -l < "+file)
	}
	st, err := emu.Load(c.name)
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range emu.NodeLocal {
		// Like a host's: every user may make files there, none may
		// remove another's.
		if fi, err := os.Stat(emu.LocalDir(st.Nodes[0].Dir, dir)); err != nil || fi.Mode()&os.ModeSticky == 0 || fi.Mode().Perm() != 0o777 {
			t.Fatalf("node 1's %s: mode %v (%v), want drwxrwxrwt", dir, fi.Mode(), err)
		}
	}
	// A directory of the user's in /run, which is not shared.
	local := filepath.Join("/run", marker(t))
	if err := os.Mkdir(local, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(local) })
	if err := os.Chown(local, int(jobUser.uid), int(jobUser.gid)); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(local, "held")
	id := holder(file)
	waitFor(t, 10*time.Second, id+" holds "+file, func() (bool, string) {
		_, err := os.Stat(file)
		return err == nil, fmt.Sprint(err)
	})
	out, err := c.run("--node", "1", "migrate", id, "2")
	if err == nil || !strings.Contains(out, "holds open "+file+", on this node's own filesystem") {
		t.Fatalf("a job with a file in /run: migrate: %v: %s", err, out)
	}
	j := c.waitFinished(id, time.Minute)
	if j.Node != "1" || *j.ExitCode != 0 || c.mustRun("--node", "1", "logs", id) != "50\n" {
		t.Fatalf("the pinned job: %+v, output %q", j, c.mustRun("--node", "1", "logs", id))
	}
	shared := filepath.Join(userDir(t), "count")
	id = holder(shared)
	waitFor(t, 10*time.Second, id+" holds "+shared, func() (bool, string) {
		_, err := os.Stat(shared)
		return err == nil, fmt.Sprint(err)
	})
	for _, to := range []string{"2", "1"} {
		time.Sleep(time.Second)
		c.mustRun("--node", "1", "migrate", id, to)
	}
	j = c.waitFinished(id, time.Minute)
	if j.Migrations != 2 || c.mustRun("--node", "1", "logs", id) != "50\n" {
		t.Fatalf("the job in the shared directory: %+v, output %q", j, c.mustRun("--node", "1", "logs", id))
	}
}
