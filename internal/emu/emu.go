// Package emu turns one Linux machine into an emulated cluster: each node is a
// network namespace with an address on a bridge, a cgroup with its CPU share
// and memory limit, optional link shaping, and its own roamd with its own
// config and state directory. Tests, benchmarks and the demo run on it; a
// real cluster needs none of it.
//
// Every resource is named after the cluster (netns roam-NAME-I, bridge
// rb-NAME, host veth rv-NAME-I, cgroup roam/NAME/nI, directory
// /run/roam/clusters/NAME), so that Down can find and remove all of it even
// after an Up that crashed half-way. It uses iproute2 (ip, tc) and nsenter
// for namespaces, one way throughout.
package emu

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"roam/internal/api"
	"roam/internal/cgroup"
	"roam/internal/errkind"
	"roam/internal/load"
	"roam/internal/procfs"
	"roam/internal/secret"
)

// BaseDir holds one directory per emulated cluster.
const BaseDir = "/run/roam/clusters"

// inMemory makes dir, a cluster's, a tmpfs of its own unless it is on one
// already. Its nodes keep their state there (bbolt, spools, checkpoints
// kept), under /run, which most hosts mount as a tmpfs. Where /run is the
// root filesystem's (this kind of machine's: ext4 without a journal, whose
// inode allocator steps over every inode freed in the last seconds, one
// by one), the spools of nodes starting hundreds of jobs a second cost
// them more than the jobs (docs/benchmarks.md, job-start). Down unmounts
// it with the cluster's other mounts.
func inMemory(dir string) error {
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		return err
	}
	if fs.Type == unix.TMPFS_MAGIC {
		return nil
	}
	if err := unix.Mount("roam-cluster", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=755"); err != nil {
		return fmt.Errorf("a tmpfs for the cluster's state at %s: %w", dir, err)
	}
	return nil
}

// DefaultSubnet is the address range of the default cluster. Every emulated
// cluster takes one /24 from 198.18.0.0/15 (RFC 2544 benchmark addresses).
const DefaultSubnet = "198.18.0.0/24"

// MaxNodes is the most nodes one /24 holds (.1 to .250; .254 is the bridge).
const MaxNodes = 250

// readyTimeout bounds the wait for a started agent to answer on its socket.
const readyTimeout = 15 * time.Second

var benchNet = func() *net.IPNet { _, n, _ := net.ParseCIDR("198.18.0.0/15"); return n }()

// Spec is what `roam cluster up` asks for.
type Spec struct {
	Name   string
	Nodes  int
	CPU    []float64 // per node, or one value for all; empty: an equal share of 90 % of the cores
	MemMB  []int     // per node, or one value for all; empty: no limit
	Link   string    // RATE[:DELAY], e.g. "100mbit:2ms"; empty: unshaped
	Subnet string    // a /24 inside 198.18.0.0/15
	Roamd  string    // path of the roamd binary
	// Policy and Interval configure every agent's load vector.
	Policy   string
	Interval time.Duration
	// Scheduler is every agent's scheduling policy at start: a built-in
	// name or a policy file; empty: the agent's default.
	Scheduler string
	// JobPids is every agent's jobs.pids, the processes and threads one
	// job may have; 0: the agent's default.
	JobPids int64
	// StateMB sizes each node's state directory: a tmpfs of its own of
	// that many MiB, so that a node's disk can be filled (a real node's
	// state disk is its own). 0: the nodes share the cluster's.
	StateMB int
	// AgentYAML is a part of roamd's config every node gets besides
	// what emu sets (limits, say): a YAML mapping whose keys are none
	// of emu's own.
	AgentYAML []byte
	// Fence is every agent's fence.lease, fence.kill and fence.margin as
	// LEASE,KILL,MARGIN (3s,6s,2s); empty: the agent's defaults. Tests
	// shorten them to fence a cut node in seconds.
	Fence string
	// Slurm starts Slurm beside the agents (slurm.go): a controller,
	// slurmdbd and its database on node 1, a slurmd on every node.
	Slurm bool
}

// State is the cluster's record on disk (cluster.json) and what status shows.
type State struct {
	Name   string `json:"name"`
	Subnet string `json:"subnet"`
	Bridge string `json:"bridge"`
	Cgroup string `json:"cgroup"`
	Link   string `json:"link,omitempty"`
	// Policy and IntervalMS are every agent's load-vector settings, kept so
	// that a node added later gets the same.
	Policy     string      `json:"policy"`
	IntervalMS int64       `json:"interval_ms"`
	Scheduler  string      `json:"scheduler,omitempty"`
	JobPids    int64       `json:"job_pids,omitempty"`
	StateMB    int         `json:"state_mb,omitempty"`
	AgentYAML  string      `json:"agent_yaml,omitempty"`
	Fence      string      `json:"fence,omitempty"`
	Slurm      bool        `json:"slurm,omitempty"`
	Status     string      `json:"status"` // "starting" until Up finished, then "up"
	Nodes      []NodeState `json:"nodes"`
}

// NodeState is one emulated node.
type NodeState struct {
	ID       string  `json:"id"`
	Addr     string  `json:"addr"`
	Capacity float64 `json:"capacity"`
	MemMB    int     `json:"mem_mb,omitempty"`
	PID      int     `json:"pid"`
	State    string  `json:"state"` // up: agent running; down: not running
	Netns    string  `json:"netns"`
	Cgroup   string  `json:"cgroup"`
	Dir      string  `json:"dir"`
	Socket   string  `json:"socket"`
}

// Errors of this package.
var (
	ErrSpec       = errors.New("cluster spec")
	ErrRunning    = errors.New("cluster already up")
	ErrNotRunning = errors.New("no such cluster")
)

var namePattern = regexp.MustCompile(`^[a-z][a-z0-9]{0,7}$`)
var ratePattern = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?(bit|kbit|mbit|gbit)$`)
var delayPattern = regexp.MustCompile(`^[0-9]+(\.[0-9]+)?(us|ms|s)$`)

// Dir is a cluster's directory.
func Dir(name string) string { return filepath.Join(BaseDir, name) }

// ImageBase holds the clusters' migration images: on tmpfs, so that a
// migration's images never wait for a disk (a host keeps them there too).
const ImageBase = "/dev/shm/roam"

// ImageDir is cluster name's part of ImageBase, one directory per node.
func ImageDir(name string) string { return filepath.Join(ImageBase, name) }

func netnsName(cluster string, i int) string { return fmt.Sprintf("roam-%s-%d", cluster, i) }
func vethName(cluster string, i int) string  { return fmt.Sprintf("rv-%s-%d", cluster, i) }
func bridgeName(cluster string) string       { return "rb-" + cluster }
func cgroupRoot(cluster string) string       { return "roam/" + cluster }

// Validate checks a spec and fills its defaults. Each error names the flag.
func (s *Spec) Validate() error {
	bad := func(flag, format string, a ...any) error {
		return errkind.New(ErrSpec, "%s: %s", flag, fmt.Sprintf(format, a...))
	}
	if !namePattern.MatchString(s.Name) {
		return bad("--cluster", "%q is not allowed (a lower-case letter, then up to 7 letters or digits)", s.Name)
	}
	if s.Nodes < 1 || s.Nodes > MaxNodes {
		return bad("--nodes", "%d is out of range (1 to %d)", s.Nodes, MaxNodes)
	}
	cores := float64(runtime.NumCPU())
	switch len(s.CPU) {
	case 0:
		share := float64(int(cores*0.9/float64(s.Nodes)*100)) / 100
		s.CPU = repeat(max(share, 0.01), s.Nodes)
	case 1:
		s.CPU = repeat(s.CPU[0], s.Nodes)
	case s.Nodes:
	default:
		return bad("--cpu", "%d values for %d nodes (give one value, or one per node)", len(s.CPU), s.Nodes)
	}
	sum := 0.0
	for _, c := range s.CPU {
		if c < 0.01 || c > cores {
			return bad("--cpu", "%v is out of range (0.01 to %v cores)", c, cores)
		}
		sum += c
	}
	if sum > cores+1e-9 {
		return bad("--cpu", "capacities sum to %.2f, more than this machine's %d cores (emulated nodes share the real cores)", sum, int(cores))
	}
	switch len(s.MemMB) {
	case 0, s.Nodes:
	case 1:
		s.MemMB = repeat(s.MemMB[0], s.Nodes)
	default:
		return bad("--mem-mb", "%d values for %d nodes (give one value, or one per node)", len(s.MemMB), s.Nodes)
	}
	for _, m := range s.MemMB {
		if m < 16 {
			return bad("--mem-mb", "%d is too small (at least 16)", m)
		}
	}
	if s.JobPids != 0 && (s.JobPids < 16 || s.JobPids > 1<<22) {
		return bad("--job-pids", "%d is out of range (16 to 4194304)", s.JobPids)
	}
	if s.StateMB != 0 && (s.StateMB < 16 || s.StateMB > 1<<20) {
		return bad("--state-mb", "%d is out of range (16 to 1048576)", s.StateMB)
	}
	if _, err := mergeConfig(agentConfig{}.marshal(), s.AgentYAML); err != nil {
		return bad("--agent-config", "%v", err)
	}
	if _, err := parseFence(s.Fence); err != nil {
		return bad("--fence", "%v", err)
	}
	if s.Link != "" {
		rate, delay, _ := strings.Cut(s.Link, ":")
		if !ratePattern.MatchString(rate) || (delay != "" && !delayPattern.MatchString(delay)) {
			return bad("--link", "%q is not RATE[:DELAY] (e.g. 100mbit:2ms; units bit, kbit, mbit, gbit and us, ms, s)", s.Link)
		}
	}
	if s.Subnet == "" {
		s.Subnet = DefaultSubnet
	}
	ip, n, err := net.ParseCIDR(s.Subnet)
	if err != nil || !ip.Equal(n.IP) || !benchNet.Contains(n.IP) {
		return bad("--subnet", "%q is not a network inside 198.18.0.0/15", s.Subnet)
	}
	if ones, _ := n.Mask.Size(); ones != 24 {
		return bad("--subnet", "%q is not a /24", s.Subnet)
	}
	if s.Policy == "" {
		s.Policy = string(load.PolicyFIFO)
	}
	if _, err := load.ParsePolicy(s.Policy); err != nil {
		return bad("--policy", "%q is not allowed (fifo, beneficial)", s.Policy)
	}
	if s.Interval == 0 {
		s.Interval = load.DefaultInterval
	}
	if s.Roamd == "" {
		return bad("roamd", "binary not found (build it with 'make')")
	}
	return nil
}

func repeat[T any](v T, n int) []T {
	out := make([]T, n)
	for i := range out {
		out[i] = v
	}
	return out
}

// hostAddr returns address .i of a /24.
func hostAddr(subnet string, i int) string {
	_, n, _ := net.ParseCIDR(subnet)
	ip := n.IP.To4()
	return fmt.Sprintf("%d.%d.%d.%d", ip[0], ip[1], ip[2], i)
}

// Load reads a cluster's state file.
func Load(name string) (State, error) {
	b, err := os.ReadFile(filepath.Join(Dir(name), "cluster.json"))
	if errors.Is(err, os.ErrNotExist) {
		return State{}, errkind.New(ErrNotRunning, "no cluster %q (start it with 'roam cluster up')", name)
	}
	if err != nil {
		return State{}, err
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return State{}, fmt.Errorf("%s: %w", filepath.Join(Dir(name), "cluster.json"), err)
	}
	return st, nil
}

func (st *State) save() error {
	b, _ := json.MarshalIndent(st, "", "  ")
	p := filepath.Join(Dir(st.Name), "cluster.json")
	if err := os.WriteFile(p+".tmp", b, 0o644); err != nil {
		return err
	}
	return os.Rename(p+".tmp", p)
}

// run runs a command and folds its stderr into the error.
func run(args ...string) error {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// Up brings a cluster up. It refuses, changing nothing, when the cluster (or
// another one on the same subnet) is up or half up.
func Up(spec Spec) (State, error) {
	if err := spec.Validate(); err != nil {
		return State{}, err
	}
	if err := checkFree(spec); err != nil {
		return State{}, err
	}
	layout, err := cgroup.Detect()
	if err != nil {
		return State{}, err
	}
	dir := Dir(spec.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return State{}, err
	}
	if err := inMemory(dir); err != nil {
		return State{}, err
	}
	st := State{Name: spec.Name, Subnet: spec.Subnet, Bridge: bridgeName(spec.Name),
		Cgroup: layout.String(), Link: spec.Link, Status: "starting",
		Policy: spec.Policy, IntervalMS: spec.Interval.Milliseconds(), Scheduler: spec.Scheduler, JobPids: spec.JobPids, Fence: spec.Fence,
		StateMB: spec.StateMB, AgentYAML: string(spec.AgentYAML), Slurm: spec.Slurm}
	// Record first: from here on, whatever happens, Down knows the cluster.
	if err := st.save(); err != nil {
		return State{}, err
	}
	sec := secret.New()
	secretPath := filepath.Join(dir, "secret")
	if err := sec.WriteFile(secretPath); err != nil {
		return st, err
	}
	br := bridgeName(spec.Name)
	if err := run("ip", "link", "add", br, "type", "bridge"); err != nil {
		return st, err
	}
	if err := run("ip", "addr", "add", hostAddr(spec.Subnet, 254)+"/24", "dev", br); err != nil {
		return st, err
	}
	if err := run("ip", "link", "set", br, "up"); err != nil {
		return st, err
	}
	if err := layout.Create(cgroupRoot(spec.Name)); err != nil {
		return st, err
	}
	if err := roomForNeighbours(spec.Nodes); err != nil {
		return st, err
	}
	var peers []string
	for i := 1; i <= spec.Nodes; i++ {
		peers = append(peers, hostAddr(spec.Subnet, i))
	}
	for i := 1; i <= spec.Nodes; i++ {
		mem := 0
		if len(spec.MemMB) > 0 {
			mem = spec.MemMB[i-1]
		}
		ns, err := addNode(&st, layout, spec, i, spec.CPU[i-1], mem, secretPath, peers)
		st.Nodes = append(st.Nodes, ns)
		if serr := st.save(); serr != nil && err == nil {
			err = serr
		}
		if err != nil {
			return st, err
		}
	}
	for _, n := range st.Nodes {
		if err := waitReady(n); err != nil {
			return st, err
		}
	}
	if spec.Slurm {
		if err := upSlurm(st, layout); err != nil {
			return st, err
		}
	}
	st.Status = "up"
	return st, st.save()
}

// checkFree refuses a cluster name or subnet already in use.
func checkFree(spec Spec) error {
	if st, err := Load(spec.Name); err == nil {
		if st.Status != "up" {
			return errkind.New(ErrRunning, "cluster %q is half up from an earlier failure; run 'roam cluster down --cluster %s' first", spec.Name, spec.Name)
		}
		return errkind.New(ErrRunning, "cluster %q is already up with %d nodes; run 'roam cluster down --cluster %s' first", spec.Name, len(st.Nodes), spec.Name)
	}
	if _, err := os.Stat(Dir(spec.Name)); err == nil {
		return errkind.New(ErrRunning, "%s exists; run 'roam cluster down --cluster %s' first", Dir(spec.Name), spec.Name)
	}
	if _, err := net.InterfaceByName(bridgeName(spec.Name)); err == nil {
		return errkind.New(ErrRunning, "bridge %s exists; run 'roam cluster down --cluster %s' first", bridgeName(spec.Name), spec.Name)
	}
	entries, _ := os.ReadDir(BaseDir)
	for _, e := range entries {
		if other, err := Load(e.Name()); err == nil && other.Subnet == spec.Subnet {
			return errkind.New(ErrRunning, "subnet %s is taken by cluster %q (choose another with --subnet)", spec.Subnet, other.Name)
		}
	}
	return nil
}

// addNode creates node i: namespace, veth on the bridge, address, shaping,
// cgroup, config, and its agent.
// peers are the addresses of the cluster's nodes, this one included.
func addNode(st *State, layout cgroup.Layout, spec Spec, i int, cpu float64, memMB int, secretPath string, peers []string) (NodeState, error) {
	ns := netnsName(st.Name, i)
	veth := vethName(st.Name, i)
	dir := filepath.Join(Dir(st.Name), "n"+strconv.Itoa(i))
	n := NodeState{
		ID: strconv.Itoa(i), Addr: hostAddr(st.Subnet, i), Capacity: cpu, MemMB: memMB,
		Netns: ns, Cgroup: cgroupRoot(st.Name) + "/n" + strconv.Itoa(i), Dir: dir,
		Socket: filepath.Join(dir, "roamd.sock"),
	}
	steps := [][]string{
		{"ip", "netns", "add", ns},
		{"ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"ip", "link", "set", veth, "master", st.Bridge},
		{"ip", "link", "set", veth, "up"},
		{"ip", "-n", ns, "addr", "add", n.Addr + "/24", "dev", "eth0"},
		{"ip", "-n", ns, "link", "set", "lo", "up"},
		{"ip", "-n", ns, "link", "set", "eth0", "up"},
	}
	if spec.Link != "" {
		rate, delay, _ := strings.Cut(spec.Link, ":")
		q := []string{"tc", "-n", ns, "qdisc", "add", "dev", "eth0", "root", "netem", "rate", rate}
		if delay != "" {
			q = append(q, "delay", delay)
		}
		steps = append(steps, q)
	}
	for _, s := range steps {
		if err := run(s...); err != nil {
			return n, err
		}
	}
	if err := layout.Create(n.Cgroup); err != nil {
		return n, err
	}
	if err := layout.SetCPU(n.Cgroup, cpu); err != nil {
		return n, err
	}
	if memMB > 0 {
		if err := layout.SetMemory(n.Cgroup, memMB); err != nil {
			return n, err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return n, err
	}
	if spec.StateMB > 0 {
		// Down unmounts it with the cluster's other mounts.
		opts := fmt.Sprintf("mode=755,size=%dm", spec.StateMB)
		if err := unix.Mount("roam-state", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, opts); err != nil {
			return n, fmt.Errorf("a tmpfs of %d MiB for node %s's state at %s: %w", spec.StateMB, n.ID, dir, err)
		}
	}
	cfg, err := mergeConfig(agentConfigFor(spec, n, secretPath, ImageDir(st.Name), peers).marshal(), spec.AgentYAML)
	if err != nil {
		return n, err
	}
	cfgPath := filepath.Join(dir, "roamd.yaml")
	if err := os.WriteFile(cfgPath, cfg, 0o644); err != nil {
		return n, err
	}
	pid, err := startAgent(spec.Roamd, ns, dir, cfgPath, filepath.Join(dir, "roamd.log"))
	n.PID = pid
	return n, err
}

// kerndatDir is ckpt.KerndatDir, where roam's CRIU caches what it learnt
// of the kernel (the CLI, which links this package, does not link CRIU's).
const kerndatDir = "/run/roam/criu"

// NodeLocal are the directories every emulated node has its own of, as
// separate hosts would: a job's file there is not on the other nodes.
// Everything else of this machine is the same on every node, as a shared
// filesystem would be.
var NodeLocal = []string{"/tmp", "/var/tmp"}

// sharedDirs is an emulated node's shared_dirs: every directory of this
// machine but the node-local ones and the host's own (/dev, /proc, /sys,
// /run), and project, the directory roam runs from, when it is in a
// node-local one (it is then carried into every node's, see startAgent).
func sharedDirs(project string) []string {
	skip := map[string]bool{"/tmp": true, "/var": true, "/dev": true, "/proc": true, "/sys": true, "/run": true, "/lost+found": true}
	var out []string
	for _, top := range []string{"/", "/var"} {
		ents, _ := os.ReadDir(top)
		for _, e := range ents {
			p := filepath.Join(top, e.Name())
			if e.IsDir() && !skip[p] && !isLocal(p) {
				out = append(out, p)
			}
		}
	}
	if isLocal(project) {
		out = append(out, project)
	}
	return out
}

// LocalDir is where, on this machine, the node whose directory is nodeDir
// keeps its own d (one of NodeLocal): /tmp in nodeDir/local/tmp.
func LocalDir(nodeDir, d string) string {
	return filepath.Join(nodeDir, "local", strings.ReplaceAll(strings.Trim(d, "/"), "/", "-"))
}

// isLocal reports whether p is in a node-local directory.
func isLocal(p string) bool {
	for _, d := range NodeLocal {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// projectDir is the directory roam runs from: the parent of roamd's (the
// source tree of a build, or the prefix of an installation).
func projectDir(roamd string) string { return filepath.Dir(filepath.Dir(roamd)) }

// roomForNeighbours raises the kernel's limits on IPv4 neighbour (ARP)
// entries, never lowers them, so that a cluster of n nodes (and a few
// more, for nodes added and other clusters) fits. The limits are for one
// table of all network namespaces together, which evicts entries above
// gc_thresh2 and refuses new ones above gc_thresh3 (1024 by default). In a
// cluster of n nodes each node talks to every other, so the table holds up
// to n·(n-1) entries: past about 32 nodes the nodes that came up last
// could not reach the others ("neighbor table overflow").
func roomForNeighbours(n int) error {
	const dir = "/proc/sys/net/ipv4/neigh/default/"
	need := 2*n*n + 1024
	for _, l := range []struct {
		file string
		want int
	}{{"gc_thresh2", need / 2}, {"gc_thresh3", need}} {
		cur, err := procfs.ReadInt(dir + l.file)
		if err != nil {
			return fmt.Errorf("neighbour table: %w", err)
		}
		if cur >= l.want {
			continue
		}
		if err := os.WriteFile(dir+l.file, []byte(strconv.Itoa(l.want)), 0o644); err != nil {
			return fmt.Errorf("neighbour table: raise %s from %d to %d: %w", l.file, cur, l.want, err)
		}
	}
	return nil
}

// startAgent starts roamd inside the node's network namespace and a mount
// namespace of its own, where the node's directory provides its own /tmp
// and /var/tmp (the project directory, should it be in one of them, is
// bound through, so that roamd, roam-init and the programs built beside
// them are on every node), in a session of its own so it outlives the CLI
// that started it.
func startAgent(roamd, ns, dir, cfgPath, logPath string) (int, error) {
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return 0, err
	}
	defer logf.Close()
	// Another emulated cluster's mounts, copied into this namespace, would
	// be in this node's jobs' mount tables, so in their images as mounts a
	// restore must bind: once that cluster is down, restores here failed
	// ("criu stage: bind /run/roam/clusters/OTHER/n1: no such file"). A real
	// node has one state directory; an emulated node is given only its own.
	script := `set -e
awk '{print $5}' /proc/self/mountinfo | sort -r | while read -r m; do
	case "$m" in
	"$ROAM_EMU_CLUSTER" | "$ROAM_EMU_CLUSTER"/* | "$ROAM_EMU_NETNS") ;;
	` + BaseDir + `/* | /run/netns/*) umount -l "$m" 2>/dev/null || true ;;
	esac
done
`
	env := append(os.Environ(), "ROAM_EMU_CLUSTER="+filepath.Dir(dir))
	project := projectDir(roamd)
	for i, d := range NodeLocal {
		own := LocalDir(dir, d)
		if err := os.MkdirAll(own, 0o755); err != nil {
			return 0, err
		}
		if err := os.Chmod(own, 0o777|os.ModeSticky); err != nil { // os.Chmod takes the sticky bit as ModeSticky only
			return 0, err
		}
		v := fmt.Sprintf("ROAM_EMU_%d", i)
		env = append(env, v+"_OWN="+own, v+"="+d)
		if rel, ok := strings.CutPrefix(project, d+"/"); ok {
			// Made on this machine, mounted only in the node's namespace.
			if err := os.MkdirAll(filepath.Join(own, rel), 0o755); err != nil {
				return 0, err
			}
			env = append(env, v+"_PROJECT="+project, v+"_PROJECT_AT="+filepath.Join(own, rel))
			script += fmt.Sprintf("mount --rbind \"$%s_PROJECT\" \"$%s_PROJECT_AT\"\n", v, v)
		}
		script += fmt.Sprintf("mount --rbind \"$%s_OWN\" \"$%s\"\n", v, v)
	}
	// A real host's /run is a tmpfs, where CRIU keeps what it learnt of
	// the kernel (ckpt.KerndatDir); this machine's may not be.
	script += fmt.Sprintf("mkdir -p -m 0700 %[1]s\nmount -t tmpfs -o mode=0700,size=1m,nosuid,nodev,noexec roam-criu %[1]s\n", kerndatDir)
	// nsenter execs roamd in place (no fork for a network namespace), as
	// unshare and sh exec theirs, so the pid is roamd's.
	script += `exec nsenter --net="$ROAM_EMU_NETNS" "$ROAM_EMU_ROAMD" --config "$ROAM_EMU_CONFIG"`
	env = append(env, "ROAM_EMU_NETNS=/run/netns/"+ns, "ROAM_EMU_ROAMD="+roamd, "ROAM_EMU_CONFIG="+cfgPath)
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c", script)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return 0, fmt.Errorf("start roamd in %s: %w", ns, err)
	}
	pid := cmd.Process.Pid
	// Reap it if it dies while we still run, so it never shows as a zombie
	// of ours, and keep how it ended for waitReady's error.
	c := &child{done: make(chan struct{})}
	children.Store(pid, c)
	go func() {
		c.err = cmd.Wait()
		close(c.done)
	}()
	return pid, nil
}

// child is an agent this process started; err is set before done closes.
type child struct {
	done chan struct{}
	err  error
}

// children maps the pid of each agent this process started to its *child.
var children sync.Map

// exited reports whether an agent this process started has ended, and how.
// For an agent started by another process it falls back to /proc.
func exited(pid int) (string, bool) {
	if v, ok := children.Load(pid); ok {
		c := v.(*child)
		select {
		case <-c.done:
			if c.err == nil {
				return "exit status 0", true
			}
			return c.err.Error(), true
		default:
			return "", false
		}
	}
	if agentAlive(pid) {
		return "", false
	}
	return "not running", true
}

// waitReady waits until the node's agent answers on its socket.
func waitReady(n NodeState) error {
	c := api.NewClient(n.Socket)
	deadline := time.Now().Add(readyTimeout)
	for {
		var nodes []api.NodeInfo
		err := c.Get(api.PathNodes, &nodes)
		if err == nil {
			return nil
		}
		if how, done := exited(n.PID); done {
			logTail, _ := os.ReadFile(filepath.Join(n.Dir, "roamd.log"))
			return fmt.Errorf("node %s: roamd ended (%s): %s", n.ID, how, lastLines(string(logTail), 3))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s: roamd did not answer on %s within %v: %v", n.ID, n.Socket, readyTimeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// lastLines is the last n lines of a log, folded onto one line.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(len(lines)-n, 0):], " | ")
}

// agentAlive reports whether pid is a live roamd (not a zombie, not a
// recycled pid of some other program).
func agentAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return err == nil && strings.Contains(string(cmdline), "roamd") && procfs.Running(pid)
}

// Status returns the cluster's state with each agent's liveness checked now.
func Status(name string) (State, error) {
	st, err := Load(name)
	if err != nil {
		return st, err
	}
	for i := range st.Nodes {
		st.Nodes[i].State = "down"
		if agentAlive(st.Nodes[i].PID) {
			st.Nodes[i].State = "up"
		}
	}
	return st, nil
}

// AddSpec is what `roam cluster add` asks for.
type AddSpec struct {
	CPU        float64
	MemMB      int
	SecretFile string // empty: the cluster's own secret
	Roamd      string
}

// Add starts one more node in a running cluster (dynamic reconfiguration,
// seed 001). With SecretFile it joins with another secret, which is how the
// tests play an outsider.
func Add(name string, as AddSpec) (NodeState, error) {
	st, err := Load(name)
	if err != nil {
		return NodeState{}, err
	}
	if len(st.Nodes) >= MaxNodes {
		return NodeState{}, errkind.New(ErrSpec, "cluster %q has %d nodes already", name, MaxNodes)
	}
	if st.Slurm {
		// Its slurm.conf lists the nodes of up, which every daemon read.
		return NodeState{}, errkind.New(ErrSpec, "cluster %q runs Slurm, whose nodes are the ones it came up with: bring it up again with --nodes", name)
	}
	layout, err := cgroup.Detect()
	if err != nil {
		return NodeState{}, err
	}
	if err := roomForNeighbours(len(st.Nodes) + 1); err != nil {
		return NodeState{}, err
	}
	secretPath := filepath.Join(Dir(name), "secret")
	if as.SecretFile != "" {
		if _, err := secret.ReadFile(as.SecretFile); err != nil {
			return NodeState{}, err
		}
		secretPath = as.SecretFile
	}
	if as.CPU <= 0 {
		as.CPU = st.Nodes[0].Capacity
	}
	spec := Spec{Name: name, Link: st.Link, Roamd: as.Roamd, Policy: st.Policy, Scheduler: st.Scheduler,
		Interval: time.Duration(st.IntervalMS) * time.Millisecond, JobPids: st.JobPids, Fence: st.Fence,
		StateMB: st.StateMB, AgentYAML: []byte(st.AgentYAML)}
	var peers []string
	for _, o := range st.Nodes {
		peers = append(peers, o.Addr)
	}
	n, err := addNode(&st, layout, spec, len(st.Nodes)+1, as.CPU, as.MemMB, secretPath, peers)
	st.Nodes = append(st.Nodes, n)
	if serr := st.save(); err == nil {
		err = serr
	}
	if err != nil {
		return n, err
	}
	return n, waitReady(n)
}
