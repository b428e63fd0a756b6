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
