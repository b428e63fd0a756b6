package emu

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"roam/internal/agent/config"
	"roam/internal/ckpt"
)

// TestAgentConfig checks that roamd reads the config emu writes as meant:
// the same keys, every one known to it, and its defaults for the rest.
func TestAgentConfig(t *testing.T) {
	bin := t.TempDir()
	if err := os.WriteFile(filepath.Join(bin, "roam-init"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	spec := Spec{Name: "t", Nodes: 3, Subnet: "198.18.7.0/24", Roamd: filepath.Join(bin, "roamd"),
		Policy: "beneficial", Interval: 250 * time.Millisecond, Scheduler: "balance", JobPids: 64, Fence: "3s,6s,2s"}
	n := NodeState{ID: "2", Addr: "198.18.7.2", Capacity: 0.5, Cgroup: "roam/t/n2",
		Dir: "/run/roam/clusters/t/n2", Socket: "/run/roam/clusters/t/n2/roamd.sock"}
	peers := []string{"198.18.7.1", "198.18.7.2", "198.18.7.3"}
	b := agentConfigFor(spec, n, "/run/roam/clusters/t/secret", "/dev/shm/roam/t", peers).marshal()
	got, err := config.Parse(b)
	if err != nil {
		t.Fatalf("roamd refuses the config emu writes: %v\n%s", err, b)
	}
	want := config.Default()
	want.NodeID, want.ClusterName, want.BindAddr, want.GossipPort = "2", "t", "198.18.7.2", config.DefaultGossipPort
	want.Join = []string{"198.18.7.1:7946", "198.18.7.3:7946"}
	want.SecretFile = "/run/roam/clusters/t/secret"
	want.StateDir, want.ImageDir, want.Socket = n.Dir, "/dev/shm/roam/t/n2", n.Socket
	want.Capacity, want.Cgroup = 0.5, "roam/t/n2"
	want.InitPath, want.Scheduler = filepath.Join(bin, "roam-init"), "balance"
	want.Load.Interval, want.Load.Policy = 250*time.Millisecond, "beneficial"
	want.MetricsAddr, want.MetricsJobUsers = "198.18.7.2:9947", true
	want.Jobs.Pids = 64
	want.Fence.Lease, want.Fence.Kill, want.Fence.Margin = 3*time.Second, 6*time.Second, 2*time.Second
	// Everything but the node-local directories is shared, and the
	// project (here, the test's temporary directory in /tmp) too.
	covered := func(p string) bool {
		for _, d := range got.SharedDirs {
			if p == d || strings.HasPrefix(p, d+"/") {
				return true
			}
		}
		return false
	}
	for _, d := range []string{"/usr", "/var/lib/x", filepath.Dir(bin)} {
		if !covered(d) {
			t.Errorf("shared_dirs %v do not hold %s", got.SharedDirs, d)
		}
	}
	for _, d := range []string{"/tmp/x", "/var/tmp/x"} {
		if covered(d) && !strings.HasPrefix(filepath.Dir(bin), d) {
			t.Errorf("shared_dirs %v hold %s", got.SharedDirs, d)
		}
	}
	for _, d := range got.SharedDirs {
		if d == "/" || d == "/tmp" || d == "/var/tmp" || d == "/var" || d == "/run" {
			t.Errorf("shared_dirs %v holds %s", got.SharedDirs, d)
		}
	}
	want.SharedDirs = got.SharedDirs
	if !reflect.DeepEqual(got, want) {
		t.Errorf("roamd reads\n%+v\nwant\n%+v\nfrom\n%s", got, want, b)
	}
}

// TestKerndatDirIsCRIUs checks that an emulated node mounts its tmpfs
// where the agent's CRIU keeps its kernel facts.
func TestKerndatDirIsCRIUs(t *testing.T) {
	if kerndatDir != ckpt.KerndatDir {
		t.Fatalf("emu mounts a tmpfs at %s, CRIU caches in %s", kerndatDir, ckpt.KerndatDir)
	}
}

// TestAgentConfigTakesExtraKeys checks --agent-config: its keys reach
// roamd beside emu's own, mappings merged, and a key that is each node's
// own (emu's to give) is refused, naming it.
func TestAgentConfigTakesExtraKeys(t *testing.T) {
	spec := Spec{Name: "t", Nodes: 1, Subnet: "198.18.7.0/24", JobPids: 64, Policy: "fifo", Interval: time.Second}
	n := NodeState{ID: "1", Addr: "198.18.7.1", Capacity: 0.5, Cgroup: "roam/t/n1",
		Dir: "/run/roam/clusters/t/n1", Socket: "/run/roam/clusters/t/n1/roamd.sock"}
	base := agentConfigFor(spec, n, "/s", "/dev/shm/roam/t", nil).marshal()
	b, err := mergeConfig(base, []byte("limits:\n  output_bytes_per_user: 33554432\njobs:\n  memory_bytes: 1073741824\n"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := config.Parse(b)
	if err != nil {
		t.Fatalf("roamd refuses the merged config: %v\n%s", err, b)
	}
	if got.Limits.OutputBytesPerUser != 32<<20 || got.Jobs.MemoryBytes != 1<<30 || got.Jobs.Pids != 64 || got.NodeID != "1" {
		t.Errorf("merged config reads output_bytes_per_user %d, jobs.memory_bytes %d, jobs.pids %d, node_id %q",
			got.Limits.OutputBytesPerUser, got.Jobs.MemoryBytes, got.Jobs.Pids, got.NodeID)
	}
	for extra, want := range map[string]string{"node_id: x\n": "node_id", "state_dir: /x\n": "state_dir", "- a\n": "mapping"} {
		if _, err := mergeConfig(base, []byte(extra)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("extra %q: %v, want an error naming %s", extra, err, want)
		}
	}
}
