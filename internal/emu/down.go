package emu

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"roam/internal/errkind"
	"roam/internal/rootdir"
	"strings"
	"syscall"
	"time"

	"roam/internal/cgroup"
)

// Down removes everything a cluster made — agents, processes in its cgroups,
// namespaces, bridge, veths, cgroups, mounts and its directory — found by
// name, so it also cleans an Up that crashed half-way. Removing a cluster
// that does not exist is not an error. It signals only the processes it
// started: the recorded agents (checked to be roamd) and the processes in
// the cluster's own cgroups.
func Down(name string) error {
	if !namePattern.MatchString(name) {
		return errkind.New(ErrSpec, "--cluster: %q is not a cluster name", name)
	}
	var errs []error
	st, _ := Load(name) // may be missing or partial: names are enough

	// Agents first, so nothing restarts jobs while we remove them; then
	// what they started that outlived them (a CRIU cut off mid-dump).
	var pids []int
	for _, n := range st.Nodes {
		if agentAlive(n.PID) {
			pids = append(pids, n.PID)
		}
	}
	theirs := agentsStarted(pids)
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGTERM)
	}
	waitGone(pids, 3*time.Second)
	killUntilGone(func() []int { return stillRunning(theirs) })

	// Then every process left in the cluster's cgroups: jobs we started.
	layout, lerr := cgroup.Detect()
	if lerr == nil {
		downSlurm(name, layout)
		root := cgroupRoot(name)
		killUntilGone(func() []int { return layout.Procs(root) })
		if err := layout.Remove(root); err != nil {
			errs = append(errs, err)
		}
		// The parent "roam" group goes too when no other cluster uses it.
		for _, d := range layout.Dirs("roam") {
			_ = syscall.Rmdir(d)
		}
	}

	// Mounts under the cluster's directory (job file systems), deepest first.
	for _, m := range append(mountsUnder(Dir(name)), mountsUnder(ImageDir(name))...) {
		_ = syscall.Unmount(m, syscall.MNT_DETACH)
	}

	// Namespaces by name; their eth0 ends go with them, taking the host
	// veth ends along.
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "roam-"+name+"-") {
			if err := run("ip", "netns", "del", e.Name()); err != nil {
				errs = append(errs, err)
			}
		}
	}
	// The kernel removes the host ends of the veths a moment after their
	// namespace; give it that moment, then remove what is left.
	for i := 0; i < 100 && len(clusterLinks(name)) > 1; i++ {
		time.Sleep(20 * time.Millisecond)
	}
	for _, l := range clusterLinks(name) {
		if err := run("ip", "link", "del", l); err != nil && !strings.Contains(err.Error(), "Cannot find device") {
			errs = append(errs, err)
		}
	}
	for _, d := range []string{Dir(name), ImageDir(name)} {
		// Under /dev/shm anyone may have made ImageBase first, or a
		// symlink in its place: remove nothing through it.
		if err := rootdir.Check(d); err != nil {
			errs = append(errs, err)
			continue
		}
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	if rootdir.Check(ImageBase) == nil {
		_ = os.Remove(ImageBase)
	}
	_ = os.Remove(BaseDir) // these only when empty
	// roam-init makes the mount point of a job's spool on the host's /run
	// (its mount namespace shares the host's tmpfs); the last cluster's
	// down removes it, unless a job still runs on this host (another
	// agent's, outside the emulated clusters): removing a directory that
	// is a mount point in other mount namespaces detaches those mounts
	// (Linux >= 3.18), and the job would lose its spool's mount.
	RemoveJobDir()
	_ = os.Remove(filepath.Dir(BaseDir))
	return errors.Join(errs...)
}

// RemoveJobDir removes the mount point of jobs' spools on the host's /run
// when no cluster is left and no job runs on this host. It is the host's,
// not a cluster's: clusters that go down side by side may each see the
// other and leave it, so a test binary calls it again once every cluster
// of its is down, and it says whether the directory is gone.
func RemoveJobDir() bool {
	if noClusters() && !jobsRun() {
		_ = os.Remove(jobDir)
	}
	_, err := os.Stat(jobDir)
	return os.IsNotExist(err)
}

// jobDir is where roam-init binds a job's spool (ckpt.JobDir, which the
// CLI does not link).
const jobDir = "/run/roam/job"

// jobsRun says whether a roam-init process runs on this host.
func jobsRun() bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if b, err := os.ReadFile("/proc/" + e.Name() + "/comm"); err == nil && string(b) == "roam-init\n" {
			return true
		}
	}
	return false
}

// noClusters says whether no emulated cluster is left on this host.
func noClusters() bool {
	ents, err := os.ReadDir(BaseDir)
	return err != nil || len(ents) == 0
}

// SetLink takes node id's link to the cluster's bridge down or up: the
// node is cut off (its agent and jobs run on, unreachable) or back.
func SetLink(name, id string, up bool) error {
	st, err := Load(name)
	if err != nil {
		return err
	}
	for i, n := range st.Nodes {
		if n.ID == id {
			state := "down"
			if up {
				state = "up"
			}
			return run("ip", "link", "set", vethName(name, i+1), state)
		}
	}
	return fmt.Errorf("cluster %s has no node %q", name, id)
}

// waitGone waits for the processes to exit, then kills those still there.
func waitGone(pids []int, d time.Duration) {
	deadline := time.Now().Add(d)
	for _, p := range pids {
		for agentAlive(p) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if agentAlive(p) {
			_ = syscall.Kill(p, syscall.SIGKILL)
			for i := 0; i < 100 && agentAlive(p); i++ {
				time.Sleep(10 * time.Millisecond)
			}
		}
	}
}

// mountsUnder lists mount points below dir, deepest first.
func mountsUnder(dir string) []string {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Split(line, " ") // one space between fields
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// Leftovers lists what of a cluster still exists on the host: namespaces,
// links, cgroups, directory. Down leaves this empty; the tests check it.
// The host's mount point of jobs' spools is no cluster's (RemoveJobDir).
func Leftovers(name string) []string {
	var out []string
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "roam-"+name+"-") {
			out = append(out, "netns "+e.Name())
		}
	}
	for _, l := range clusterLinks(name) {
		out = append(out, "link "+l)
	}
	if layout, err := cgroup.Detect(); err == nil {
		if layout.Exists(cgroupRoot(name)) {
			out = append(out, "cgroup "+cgroupRoot(name))
		}
		// Slurm's freezer, cpuset and devices groups (slurm.go).
		hs, _ := slurmHierarchies(layout)
		for _, h := range hs {
			if d := filepath.Join(h.mount, cgroupRoot(name)); exists(d) {
				out = append(out, "cgroup "+d)
			}
		}
	}
	for _, d := range []string{Dir(name), ImageDir(name)} {
		if _, err := os.Stat(d); err == nil {
			out = append(out, "dir "+d)
		}
	}
	for _, m := range append(mountsUnder(Dir(name)), mountsUnder(ImageDir(name))...) {
		out = append(out, "mount "+m)
	}
	return out
}

// Exec runs argv inside node id of a cluster — in its network namespace and
// its cgroup, so the node's probes count it — with the caller's stdio. It
// returns when the command ends. Used for background load in benchmarks and
// tests (`roam cluster exec`).
func Exec(name, id string, argv []string, stdin, stdout, stderr *os.File) (*exec.Cmd, error) {
	st, err := Load(name)
	if err != nil {
		return nil, err
	}
	var node *NodeState
	for i := range st.Nodes {
		if st.Nodes[i].ID == id {
			node = &st.Nodes[i]
		}
	}
	if node == nil {
		return nil, errkind.New(ErrSpec, "--node: node %q is not in cluster %q", id, name)
	}
	if len(argv) == 0 {
		return nil, errkind.New(ErrSpec, "no command given")
	}
	layout, err := cgroup.Detect()
	if err != nil {
		return nil, err
	}
	// Join the cgroup from inside the child before exec: a small shell
	// writes its own pid, so the command never runs outside the node.
	procs := []string{}
	for _, d := range layout.Dirs(node.Cgroup) {
		procs = append(procs, filepath.Join(d, "cgroup.procs"))
	}
	script := `for f in ` + strings.Join(procs, " ") + `; do echo $$ > "$f" || exit 125; done; exec "$@"`
	args := append([]string{"--net=/run/netns/" + node.Netns, "sh", "-c", script, "roam-exec"}, argv...)
	cmd := exec.Command("nsenter", args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	return cmd, cmd.Start()
}

// clusterLinks lists the cluster's bridge and host-side veths that exist.
func clusterLinks(name string) []string {
	var out []string
	ifaces, _ := net.Interfaces()
	for _, it := range ifaces {
		if strings.HasPrefix(it.Name, "rv-"+name+"-") || it.Name == bridgeName(name) {
			out = append(out, it.Name)
		}
	}
	return out
}

// Start restarts node id's agent when it is not running (after a crash or a
// kill in a test), with its config and state as they were.
func Start(name, id, roamd string) (NodeState, error) {
	st, err := Load(name)
	if err != nil {
		return NodeState{}, err
	}
	for i := range st.Nodes {
		n := &st.Nodes[i]
		if n.ID != id {
			continue
		}
		if agentAlive(n.PID) {
			return *n, errkind.New(ErrRunning, "node %s's agent is running (pid %d)", id, n.PID)
		}
		pid, err := startAgent(roamd, n.Netns, n.Dir, filepath.Join(n.Dir, "roamd.yaml"), filepath.Join(n.Dir, "roamd.log"))
		if err != nil {
			return *n, err
		}
		n.PID = pid
		if err := st.save(); err != nil {
			return *n, err
		}
		return *n, waitReady(*n)
	}
	return NodeState{}, errkind.New(ErrSpec, "--node: node %q is not in cluster %q", id, name)
}
