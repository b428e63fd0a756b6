// Package e2e runs roam end to end: real roam and roamd binaries, real
// emulated clusters (network namespaces, cgroups), real processes. It needs
// root, and fails rather than skips without it, so that CI can never pass by
// running nothing.
//
// Each test brings up its own cluster with its own name and /24, so the
// tests of this package may run beside other packages' tests. Subnets in use:
// 198.18.10.0/24 to 198.18.48.0/24, 198.18.50.0/24 to 198.18.52.0/24,
// 198.18.55.0/24, 198.18.58.0/24, 198.18.60.0/24 to 198.18.70.0/24, 198.18.73.0/24,
// 198.18.78.0/24 and 198.18.79.0/24 (this package), 198.18.102.0/24 (the
// benchmarks).
//
// Also 198.18.76.0/24 (TestDefaultPolicySpreadsABurst) and 198.18.77.0/24
// (roam bench burst, which TestBenchQuickAll runs), 198.18.80.0/24
// (TestRecordsBudget) and 198.18.83.0/24 (TestConnectionFloodsAreBounded),
// 198.18.89.0/24 (TestChaosShort) and 198.18.104.0/24 (roam bench chaos).
//
// Jobs run as jobUser, a user with a uid above 65,535 and three groups,
// unless a test is about root's jobs (owner_test.go).
package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"roam/internal/api"
	"roam/internal/emu"
)

var binDir string

// e2eRoot holds binDir and TMPDIR, in a directory every emulated node
// shares.
var e2eRoot string

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "FAIL: the e2e tests need root (network namespaces, cgroups, CRIU)")
		os.Exit(1)
	}
	// Every emulated node has its own /tmp and /var/tmp: the tests' files
	// and programs are in a directory all nodes share, which every user
	// can enter, and so are their temporary directories.
	root, err := os.MkdirTemp("/var/lib", "roam-e2e-")
	if err != nil {
		panic(err)
	}
	e2eRoot = root
	// fail ends the run before the tests, with the directory removed.
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, format, args...)
		os.RemoveAll(root)
		os.Exit(1)
	}
	dir := filepath.Join(root, "bin")
	tmp := filepath.Join(root, "tmp")
	for _, d := range []string{dir, tmp} {
		if err := os.Mkdir(d, 0o755); err != nil {
			fail("FAIL: %v\n", err)
		}
	}
	if err := os.Chmod(tmp, 0o777|os.ModeSticky); err != nil { // os.Chmod takes the sticky bit as ModeSticky only
		fail("FAIL: %v\n", err)
	}
	os.Setenv("TMPDIR", tmp)
	// With the lock-order checker (package lockorder): an agent that
	// takes its locks in an order doc.go does not allow dies with the
	// stack, and its cluster's teardown names it.
	out, err := exec.Command("go", "build", "-tags", "lockcheck", "-o", dir+"/", "roam/cmd/roam", "roam/cmd/roamd", "roam/cmd/roam-ckpt").CombinedOutput()
	if err != nil {
		fail("FAIL: build: %v\n%s", err, out)
	}
	// With musl, as make builds it (Makefile, INITCC).
	out, err = exec.Command("musl-gcc", "-O2", "-static", "-o", filepath.Join(dir, "roam-init"), "../../cinit/roam-init.c").CombinedOutput()
	if err != nil {
		fail("FAIL: build roam-init: %v\n%s", err, out)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		fail("FAIL: %v\n", err)
	}
	binDir = dir
	dropUser, err := makeJobUser()
	if err != nil {
		fail("FAIL: %v\n", err)
	}
	code := m.Run()
	dropUser()
	os.RemoveAll(root)
	// Every cluster of the tests is down: the host's mount point of jobs'
	// spools goes too, unless another cluster or job of this host uses it.
	// The last jobs' roam-init may still be ending (killed with their
	// node), which RemoveJobDir takes for a job of another's.
	gone := emu.RemoveJobDir()
	for end := time.Now().Add(10 * time.Second); !gone && time.Now().Before(end); gone = emu.RemoveJobDir() {
		time.Sleep(100 * time.Millisecond)
	}
	if !gone {
		fmt.Fprintln(os.Stderr, "e2e: /run/roam/job is left: another emulated cluster or job on this host uses it")
	}
	os.Exit(code)
}

// cluster is an emulated cluster one test owns.
type cluster struct {
	t    *testing.T
	name string
	// env is added to the environment of every roam command, so to the
	// agents `cluster up` starts and to the CRIU they run.
	env []string
}

// upCluster brings up a cluster named name on 198.18.SUBNET.0/24 and
// registers its teardown, which also checks that nothing is left behind.
// ours holds the names of the clusters these tests brought up: another
// program's emulated clusters on this host (a benchmark, another tree's
// tests) may run jobs of the same ids, which copies leaves out.
var ours sync.Map

func upCluster(t *testing.T, name string, subnet int, args ...string) *cluster {
	t.Helper()
	return upClusterEnv(t, name, subnet, nil, args...)
}

// upClusterEnv is upCluster with env in its agents' environment.
func upClusterEnv(t *testing.T, name string, subnet int, env []string, args ...string) *cluster {
	t.Helper()
	c := &cluster{t: t, name: name, env: env}
	ours.Store(name, true)
	_, _ = c.run("cluster", "down") // a leftover of an earlier, killed run
	t.Cleanup(func() {
		if st, err := emu.Load(name); err == nil {
			for _, n := range st.Nodes {
				if log, _ := os.ReadFile(filepath.Join(n.Dir, "roamd.log")); bytes.Contains(log, []byte("lock order broken")) {
					i := bytes.Index(log, []byte("lock order broken"))
					t.Errorf("node %s's agent broke the lock order (internal/agent/doc.go):\n%s", n.ID, log[i:min(len(log), i+3000)])
				}
			}
		}
		if out, err := c.run("cluster", "down"); err != nil {
			t.Errorf("cluster down: %v: %s", err, out)
		}
		if left := emu.Leftovers(name); len(left) > 0 {
			t.Errorf("cluster down left %v", left)
		}
	})
	args = append([]string{"cluster", "up", "--subnet", fmt.Sprintf("198.18.%d.0/24", subnet)}, args...)
	c.mustRun(args...)
	c.ownMountsOnly()
	return c
}

// ownMountsOnly checks that no agent of the cluster sees another emulated
// cluster's directories: its jobs' images would list them as mounts a
// restore must bind, and a restore failed once that cluster was down.
func (c *cluster) ownMountsOnly() {
	c.t.Helper()
	own := emu.Dir(c.name)
	for id, pid := range c.agentPIDs() {
		mi, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
		if err != nil {
			c.t.Fatalf("node %s's mounts: %v", id, err)
		}
		for _, l := range strings.Split(string(mi), "\n") {
			f := strings.Fields(l)
			if len(f) > 4 && strings.HasPrefix(f[4], emu.BaseDir+"/") && f[4] != own && !strings.HasPrefix(f[4], own+"/") {
				c.t.Fatalf("node %s's agent sees another cluster's mount %s", id, f[4])
			}
		}
	}
}

// run runs the roam CLI against this cluster.
func (c *cluster) run(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(binDir, "roam"), args...)
	cmd.Env = append(append(os.Environ(), c.env...), "ROAM_CLUSTER="+c.name)
	cmd.Dir = e2eRoot
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if err != nil {
		return out.String() + errOut.String(), err
	}
	return out.String(), nil
}

func (c *cluster) mustRun(args ...string) string {
	c.t.Helper()
	out, err := c.run(args...)
	if err != nil {
		c.t.Fatalf("roam %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// statusJSON is `roam cluster status --json`.
type statusJSON struct {
	Nodes []struct {
		ID       string  `json:"id"`
		Addr     string  `json:"addr"`
		Capacity float64 `json:"capacity"`
		PID      int     `json:"pid"`
		State    string  `json:"state"`
	} `json:"nodes"`
}

func (c *cluster) status() statusJSON {
	c.t.Helper()
	var st statusJSON
	if err := json.Unmarshal([]byte(c.mustRun("cluster", "status", "--json")), &st); err != nil {
		c.t.Fatal(err)
	}
	return st
}

// nodes is `roam --node ID nodes --json`; nil when the agent does not answer.
func (c *cluster) nodes(id string) []api.NodeInfo {
	out, err := c.run("--node", id, "nodes", "--json")
	if err != nil {
		return nil
	}
	var ns []api.NodeInfo
	if json.Unmarshal([]byte(out), &ns) != nil {
		return nil
	}
	return ns
}

func (c *cluster) stats(id string) api.Stats {
	c.t.Helper()
	var s api.Stats
	if err := json.Unmarshal([]byte(c.mustRun("--node", id, "stats")), &s); err != nil {
		c.t.Fatal(err)
	}
	return s
}

// waitFor polls cond until it holds or the deadline passes; on failure it
// reports cond's last explanation.
func waitFor(t *testing.T, d time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(d)
	var why string
	for {
		var ok bool
		ok, why = cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not true within %v: %s", what, d, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// alive returns the ids node sees alive.
func alive(ns []api.NodeInfo) map[string]bool {
	m := map[string]bool{}
	for _, n := range ns {
		if n.Alive {
			m[n.ID] = true
		}
	}
	return m
}

func find(ns []api.NodeInfo, id string) *api.NodeInfo {
	for i := range ns {
		if ns[i].ID == id {
			return &ns[i]
		}
	}
	return nil
}

// long skips a check that takes minutes unless ROAM_TEST_LONG is set:
// `make test-long` runs it, `make test` does not (docs/testing.md).
func long(t *testing.T) {
	t.Helper()
	if os.Getenv("ROAM_TEST_LONG") == "" {
		t.Skip("a long check: make test-long (ROAM_TEST_LONG=1) runs it")
	}
}
