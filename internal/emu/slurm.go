package emu

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"roam/internal/cgroup"
)

// slurmReadyTimeout bounds the wait for every slurmd to register idle with
// the controller (the database's first start takes a few seconds of it).
const slurmReadyTimeout = 90 * time.Second

// SlurmPrograms are the programs `roam cluster up --slurm` runs, from
// Debian's slurmctld, slurmd, slurm-client, slurmdbd, munge and
// mariadb-server (scripts/install-slurm.sh installs them).
var SlurmPrograms = []string{"munged", "mariadbd", "mariadb-install-db", "mariadb", "slurmdbd", "slurmctld", "slurmd", "sinfo"}

// SlurmMissing names the programs of SlurmPrograms this machine lacks.
func SlurmMissing() []string {
	var out []string
	for _, p := range SlurmPrograms {
		if _, err := exec.LookPath(p); err != nil {
			out = append(out, p)
		}
	}
	return out
}

// upSlurm starts Slurm in a cluster whose agents are up: munged, MariaDB,
// slurmdbd and slurmctld on node 1, and one slurmd per node in the node's
// network and mount namespaces and under its cgroup. Every daemon is in a
// group of the cluster's cgroup (the head node's daemons in roam/NAME/slurm),
// so that Down ends them with the cluster's other processes.
func upSlurm(st State, layout cgroup.Layout) error {
	if m := SlurmMissing(); len(m) > 0 {
		return fmt.Errorf("--slurm: %s not installed (scripts/install-slurm.sh installs Debian's Slurm, munge and MariaDB)", strings.Join(m, ", "))
	}
	hs, err := slurmHierarchies(layout)
	if err != nil {
		return err
	}
	headGroup := cgroupRoot(st.Name) + "/slurm"
	if err := createGroups(hs, headGroup); err != nil {
		return err
	}
	password, err := writeSlurmFiles(st, layout.V2)
	if err != nil {
		return err
	}
	if err := startHead(st, hs, headGroup, password); err != nil {
		return err
	}
	for _, n := range st.Nodes {
		if err := startSlurmd(st, n, hs); err != nil {
			return err
		}
	}
	return waitSlurmIdle(st)
}

// startHead starts munged (on this machine: it listens on a Unix socket
// alone), then on node 1 MariaDB, slurmdbd and slurmctld, each once the
// one before it answers.
func startHead(st State, hs []hierarchy, group, password string) error {
	dir := SlurmDir(st.Name)
	head := st.Nodes[0]
	headNet := "/run/netns/" + head.Netns
	sock := filepath.Join(dir, "munge.sock")
	done, err := startDaemon(dir, "munged", hs, group, "", "",
		"munged", "-F", "-f", "-S", sock, "--key-file", filepath.Join(dir, "munge.key"),
		"--pid-file", filepath.Join(dir, "munged.pid"), "--seed-file", filepath.Join(dir, "munged.seed"),
		"--log-file", filepath.Join(dir, "munged.log"))
	if err == nil {
		err = waitFor("munged's socket", dir, "munged", done, func() bool { return exists(sock) })
	}
	if err == nil {
		err = startDatabase(st, hs, group, headNet, password)
	}
	if err != nil {
		return err
	}
	hostname := slurmNodeName(head.ID)
	dbd := net.JoinHostPort(head.Addr, strconv.Itoa(slurmdbdPort))
	done, err = startDaemon(dir, "slurmdbd", hs, group, headNet, hostname, "slurmdbd", "-D")
	if err == nil {
		err = waitFor("slurmdbd on "+dbd, dir, "slurmdbd", done, func() bool { return dials(dbd) })
	}
	if err != nil {
		return err
	}
	_, err = startDaemon(dir, "slurmctld", hs, group, headNet, hostname, "slurmctld", "-D", "-i", "-f", SlurmConf(st.Name))
	return err
}

// writeSlurmFiles writes the cluster's Slurm configuration and munge key,
// and returns the database password it chose.
func writeSlurmFiles(st State, v2 bool) (string, error) {
	dir := SlurmDir(st.Name)
	for _, d := range []string{dir, filepath.Join(dir, "ctld")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return "", err
		}
	}
	for _, n := range st.Nodes {
		if err := os.MkdirAll(slurmSpool(st.Name, slurmNodeName(n.ID)), 0o755); err != nil {
			return "", err
		}
	}
	key := make([]byte, 1024)
	pw := make([]byte, 16)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	if _, err := rand.Read(pw); err != nil {
		return "", err
	}
	password := hex.EncodeToString(pw)
	files := []struct {
		name string
		data []byte
		mode os.FileMode
	}{
		{"munge.key", key, 0o400},
		{"slurm.conf", []byte(slurmConf(st)), 0o644},
		{"cgroup.conf", []byte(cgroupConf(v2)), 0o644},
		{"plugstack.conf", nil, 0o644},
		{"slurmdbd.conf", []byte(slurmdbdConf(st, password)), 0o600},
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), f.data, f.mode); err != nil {
			return "", err
		}
	}
	return password, nil
}

// startDatabase makes and starts the accounting database, MariaDB on node
// 1's loopback, with a user slurmdbd logs in as.
func startDatabase(st State, hs []hierarchy, group, netns, password string) error {
	dir := SlurmDir(st.Name)
	my := filepath.Join(dir, "mysql")
	data := filepath.Join(my, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return err
	}
	if err := run("chown", "-R", "mysql:mysql", my); err != nil {
		return err
	}
	if err := run("mariadb-install-db", "--no-defaults", "--datadir="+data, "--user=mysql",
		"--auth-root-authentication-method=socket", "--skip-test-db"); err != nil {
		return err
	}
	sock := filepath.Join(my, "sock")
	done, err := startDaemon(dir, "mariadbd", hs, group, netns, "", "mariadbd", "--no-defaults", "--datadir="+data,
		"--user=mysql", "--socket="+sock, "--bind-address=127.0.0.1", "--port="+strconv.Itoa(mysqlPort),
		"--pid-file="+filepath.Join(my, "pid"), "--skip-name-resolve", "--skip-log-bin")
	if err == nil {
		err = waitFor("MariaDB's socket", dir, "mariadbd", done, func() bool { return exists(sock) })
	}
	if err != nil {
		return err
	}
	sql := fmt.Sprintf("CREATE USER 'slurm'@'127.0.0.1' IDENTIFIED BY '%s'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';", password)
	return run("mariadb", "--no-defaults", "--socket="+sock, "-e", sql)
}

// startSlurmd starts node n's slurmd in the node's network and mount
// namespaces (its agent's) and its cgroup, where a cgroup namespace of its
// own shows the node's group as the root of every hierarchy: Slurm's own
// paths (slurm/uid_U/job_J) are then the node's, and several slurmds on
// one machine never meet.
func startSlurmd(st State, n NodeState, hs []hierarchy) error {
	dir := SlurmDir(st.Name)
	name := slurmNodeName(n.ID)
	if err := createGroups(hs, n.Cgroup); err != nil {
		return err
	}
	mounts := "mount -t tmpfs -o mode=755,nosuid,nodev,noexec roam-cgroup /sys/fs/cgroup\n"
	for _, h := range hs {
		if h.v2 {
			mounts = "mount -t cgroup2 -o nosuid,nodev,noexec cgroup2 /sys/fs/cgroup\n"
			break
		}
		mounts += fmt.Sprintf("mkdir -p %[1]s && mount -t cgroup -o nosuid,nodev,noexec,%[2]s cgroup %[1]s\n", h.mount, strings.Join(h.controllers, ","))
	}
	inner := "hostname " + name + "\n" + mounts + `exec "$@"`
	script := joinScript(hs, n.Cgroup) +
		fmt.Sprintf("exec nsenter -t %d -m -n unshare --mount --propagation private --cgroup --uts sh -c '%s' slurmd \"$@\"", n.PID, inner)
	args := []string{"slurmd", "-D", "-N", name, "-f", SlurmConf(st.Name)}
	cmd := exec.Command("sh", append([]string{"-c", script, "sh"}, args...)...)
	_, err := startCmd(cmd, filepath.Join(dir, name, "slurmd.out"), SlurmConf(st.Name))
	return err
}

// startDaemon starts a head daemon in group (under every hierarchy), in
// network namespace netns and with host name hostname when given, its
// output in dir/NAME.out.
func startDaemon(dir, name string, hs []hierarchy, group, netns, hostname string, argv ...string) (<-chan struct{}, error) {
	script := joinScript(hs, group)
	if hostname != "" {
		script += fmt.Sprintf("exec unshare --uts sh -c 'hostname %s; exec \"$@\"' sh ", hostname)
	} else {
		script += "exec "
	}
	if netns != "" {
		script += fmt.Sprintf("nsenter --net=%s ", netns)
	}
	script += `"$@"`
	cmd := exec.Command("sh", append([]string{"-c", script, "sh"}, argv...)...)
	return startCmd(cmd, filepath.Join(dir, name+".out"), filepath.Join(dir, "slurm.conf"))
}

// startCmd starts cmd in a session of its own, its output in logPath, and
// reaps it when it ends while this process runs. Every daemon finds the
// cluster's configuration through SLURM_CONF (slurmdbd.conf beside it).
func startCmd(cmd *exec.Cmd, logPath, conf string) (<-chan struct{}, error) {
	cmd.Env = append(os.Environ(), "SLURM_CONF="+conf)
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cmd.Args, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	return done, nil
}

// joinScript is shell that moves the shell itself into group under every
// hierarchy, before it execs the daemon.
func joinScript(hs []hierarchy, group string) string {
	var b strings.Builder
	b.WriteString("set -e\n")
	for _, h := range hs {
		fmt.Fprintf(&b, "echo $$ > %s\n", filepath.Join(h.mount, group, "cgroup.procs"))
	}
	return b.String()
}

// waitFor waits until ok, or fails with the tail of dir/name.out when the
// daemon ended (done closed) or the time is up.
func waitFor(what, dir, name string, done <-chan struct{}, ok func() bool) error {
	deadline := time.Now().Add(slurmReadyTimeout)
	for !ok() {
		ended := false
		select {
		case <-done:
			ended = true
		default:
		}
		if ended || time.Now().After(deadline) {
			out, _ := os.ReadFile(filepath.Join(dir, name+".out"))
			how := fmt.Sprintf("within %v", slurmReadyTimeout)
			if ended {
				how = name + " ended"
			}
			return fmt.Errorf("--slurm: no %s (%s): %s", what, how, lastLines(string(out), 3))
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil
}

func dials(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err == nil {
		c.Close()
	}
	return err == nil
}

// waitSlurmIdle waits until the controller reports every node idle.
func waitSlurmIdle(st State) error {
	dir := SlurmDir(st.Name)
	var last string
	err := waitFor("idle nodes", dir, "slurmctld", nil, func() bool {
		cmd := exec.Command("sinfo", "-h", "-N", "-o", "%N %T")
		cmd.Env = append(os.Environ(), "SLURM_CONF="+SlurmConf(st.Name))
		out, _ := cmd.CombinedOutput()
		last = strings.TrimSpace(string(out))
		return strings.Count(last, " idle") == len(st.Nodes)
	})
	if err != nil {
		return fmt.Errorf("%w (sinfo: %s)", err, strings.ReplaceAll(last, "\n", "; "))
	}
	return nil
}

// hierarchy is one cgroup hierarchy Slurm's daemons join: a v1 mount and
// its controllers, or the v2 root.
type hierarchy struct {
	mount       string
	controllers []string
	v2          bool
}

// v1Controllers are the controllers a v1 hierarchy may carry.
var v1Controllers = map[string]bool{"cpu": true, "cpuacct": true, "cpuset": true, "memory": true, "devices": true,
	"freezer": true, "blkio": true, "pids": true, "net_cls": true, "net_prio": true, "perf_event": true,
	"hugetlb": true, "rdma": true, "misc": true}

// slurmHierarchies are the hierarchies of this machine's layout: the v2
// root, or every v1 mount that carries a controller (Slurm's freezer,
// cpuset and devices besides roam's own).
func slurmHierarchies(layout cgroup.Layout) ([]hierarchy, error) {
	if layout.V2 {
		return []hierarchy{{mount: layout.CPU, v2: true}}, nil
	}
	f, err := os.Open("/proc/mounts")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []hierarchy
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Split(sc.Text(), " ")
		if len(fs) < 4 || fs[2] != "cgroup" || seen[fs[1]] {
			continue
		}
		h := hierarchy{mount: fs[1]}
		for _, o := range strings.Split(fs[3], ",") {
			if v1Controllers[o] {
				h.controllers = append(h.controllers, o)
			}
		}
		if len(h.controllers) > 0 {
			seen[fs[1]] = true
			out = append(out, h)
		}
	}
	return out, sc.Err()
}

// createGroups makes group rel under every hierarchy, with its parents; a
// new cpuset group gets its parent's CPUs and memory nodes (the kernel
// leaves them empty, and an empty cpuset takes no process).
func createGroups(hs []hierarchy, rel string) error {
	for _, h := range hs {
		d := h.mount
		for _, p := range strings.Split(filepath.Clean(rel), "/") {
			parent := d
			d = filepath.Join(d, p)
			if err := os.Mkdir(d, 0o755); err != nil && !os.IsExist(err) {
				return fmt.Errorf("cgroup %s: %w", d, err)
			}
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				if cur, err := os.ReadFile(filepath.Join(d, f)); err == nil && strings.TrimSpace(string(cur)) == "" {
					v, _ := os.ReadFile(filepath.Join(parent, f))
					if err := os.WriteFile(filepath.Join(d, f), v, 0); err != nil {
						return fmt.Errorf("cgroup %s: %w", filepath.Join(d, f), err)
					}
				}
			}
		}
	}
	return nil
}

// downSlurm ends every process in the cluster's groups under every
// hierarchy and removes those groups that are not roam's own (Down removes
// those): Slurm's freezer, cpuset and devices groups of its jobs.
func downSlurm(name string, layout cgroup.Layout) {
	hs, err := slurmHierarchies(layout)
	if err != nil || layout.V2 {
		return
	}
	own := map[string]bool{}
	for _, d := range layout.Dirs("") {
		own[filepath.Clean(d)] = true
	}
	for _, h := range hs {
		if own[filepath.Clean(h.mount)] {
			continue
		}
		root := filepath.Join(h.mount, cgroupRoot(name))
		// Killed and removed again until none is left: a daemon still
		// ending while the groups are walked makes one more (a cluster's
		// empty job_N groups were left so).
		for pass := 0; pass < 5; pass++ {
			killUntilGone(func() []int { return cgroup.TreeProcs(root) })
			if cgroup.RemoveTree(root) == nil {
				break
			}
		}
		_ = syscall.Rmdir(filepath.Join(h.mount, "roam"))
	}
}

// killUntilGone SIGKILLs the processes procs lists until it lists none,
// for at most two seconds.
func killUntilGone(procs func() []int) {
	for try := 0; try < 100; try++ {
		ps := procs()
		if len(ps) == 0 {
			return
		}
		for _, p := range ps {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
