package emu

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// gossipPort is every emulated node's gossip port: roamd's default
// (config.DefaultGossipPort), written into each config so that the join
// addresses below cannot disagree with it. Each node has its own address.
const gossipPort = 7946

// MetricsPort is every emulated node's metrics_addr port.
const MetricsPort = 9947

// agentConfig is the part of roamd's YAML config file (config.Config) that an
// emulated node sets; roamd fills the rest with its defaults and validates
// the whole when it starts (a refusal shows in waitReady's error). emu
// writes the file itself so that the CLI links no agent code;
// config_test.go checks that roamd reads it back as meant.
type agentConfig struct {
	NodeID string `yaml:"node_id"`
	// ClusterName is the emulated cluster's name: its checkpoint files
	// are bound to it.
	ClusterName string   `yaml:"cluster_name"`
	BindAddr    string   `yaml:"bind_addr"`
	GossipPort  int      `yaml:"gossip_port"`
	Join        []string `yaml:"join,omitempty"`
	SecretFile  string   `yaml:"secret_file"`
	StateDir    string   `yaml:"state_dir"`
	ImageDir    string   `yaml:"image_dir"`
	Socket      string   `yaml:"socket"`
	Capacity    float64  `yaml:"capacity"`
	Cgroup      string   `yaml:"cgroup"`
	InitPath    string   `yaml:"init_path,omitempty"`
	Scheduler   string   `yaml:"scheduler,omitempty"`
	SharedDirs  []string `yaml:"shared_dirs"`
	// MetricsAddr is the node's scrape and web view: on its own address,
	// which the host reaches over the cluster's bridge (roam web).
	MetricsAddr string `yaml:"metrics_addr"`
	// MetricsJobUsers: an emulated cluster's scrape counts jobs by user
	// (its users are the tests').
	MetricsJobUsers bool `yaml:"metrics_job_users"`
	Load            struct {
		Interval time.Duration `yaml:"interval"`
		Policy   string        `yaml:"policy"`
	} `yaml:"load"`
	Jobs struct {
		Pids int64 `yaml:"pids,omitempty"`
	} `yaml:"jobs,omitempty"`
	Fence *fenceConfig `yaml:"fence,omitempty"`
	Slurm *slurmAgent  `yaml:"slurm,omitempty"`
}

// slurmAgent is roamd's slurm section on a node of a cluster with Slurm:
// its slurmd's node name, the cluster's slurm.conf, and the group its
// slurmd makes its jobs' groups in, seen from the machine (slurm.go).
type slurmAgent struct {
	Enabled bool   `yaml:"enabled"`
	Conf    string `yaml:"conf"`
	Node    string `yaml:"node"`
	Cgroup  string `yaml:"cgroup"`
	Spool   string `yaml:"spool"`
}

// fenceConfig is roamd's fence section (package fence's Config).
type fenceConfig struct {
	Lease  time.Duration `yaml:"lease"`
	Kill   time.Duration `yaml:"kill"`
	Margin time.Duration `yaml:"margin"`
}

// parseFence reads --fence, LEASE,KILL,MARGIN: nil for "", the agent's
// defaults. roamd checks the three against each other as it starts.
func parseFence(s string) (*fenceConfig, error) {
	if s == "" {
		return nil, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return nil, fmt.Errorf("%q is not LEASE,KILL,MARGIN (e.g. 3s,6s,2s)", s)
	}
	var d [3]time.Duration
	for i, p := range parts {
		v, err := time.ParseDuration(p)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%q is not LEASE,KILL,MARGIN (e.g. 3s,6s,2s): %q is not a positive duration", s, p)
		}
		d[i] = v
	}
	return &fenceConfig{Lease: d[0], Kill: d[1], Margin: d[2]}, nil
}

// agentConfigFor is node n's config in a cluster of spec (validated), whose
// nodes have the addresses peers; imageBase holds the cluster's images.
func agentConfigFor(spec Spec, n NodeState, secretPath, imageBase string, peers []string) agentConfig {
	c := agentConfig{
		NodeID:      n.ID,
		ClusterName: spec.Name,
		BindAddr:    n.Addr,
		GossipPort:  gossipPort,
		SecretFile:  secretPath,
		StateDir:    n.Dir,
		ImageDir:    filepath.Join(imageBase, "n"+n.ID),
		Socket:      n.Socket,
		Capacity:    n.Capacity,
		Cgroup:      n.Cgroup,
		Scheduler:   spec.Scheduler,
		// Each node has its own /tmp and /var/tmp; the rest of this
		// machine is the same on every node.
		SharedDirs:      sharedDirs(projectDir(spec.Roamd)),
		MetricsAddr:     net.JoinHostPort(n.Addr, strconv.Itoa(MetricsPort)),
		MetricsJobUsers: true,
	}
	c.Load.Interval = spec.Interval
	c.Load.Policy = spec.Policy
	c.Jobs.Pids = spec.JobPids
	c.Fence, _ = parseFence(spec.Fence) // validated with the spec
	if spec.Slurm {
		name := slurmNodeName(n.ID)
		c.Slurm = &slurmAgent{Enabled: true, Conf: SlurmConf(spec.Name), Node: name, Cgroup: n.Cgroup + "/slurm_" + name,
			Spool: slurmSpool(spec.Name, name)}
	}
	// roam-init is installed beside roamd (not beside whatever program
	// brings the cluster up: a test binary, say).
	if spec.Roamd != "" {
		if p := filepath.Join(filepath.Dir(spec.Roamd), "roam-init"); exists(p) {
			c.InitPath = p
		}
	}
	// Join through every other node of the cluster, those already up and
	// those still to come: an agent retries while it is alone, so a node
	// restarted later finds the cluster again through any of them.
	for _, addr := range peers {
		if addr != n.Addr {
			c.Join = append(c.Join, net.JoinHostPort(addr, strconv.Itoa(gossipPort)))
		}
	}
	return c
}

func (c agentConfig) marshal() []byte {
	b, _ := yaml.Marshal(c)
	return b
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// mergeConfig adds extra, a YAML mapping of roamd's config keys, to base,
// the config emu wrote: a mapping under a key is merged key by key, any
// other value replaces base's. A key emu sets itself at the top (node_id,
// state_dir, ...) is refused: each node's own values are emu's to give.
// roamd checks the keys and values when it starts.
func mergeConfig(base, extra []byte) ([]byte, error) {
	if len(extra) == 0 {
		return base, nil
	}
	var b, x map[string]any
	if err := yaml.Unmarshal(base, &b); err != nil {
		return nil, err
	}
	if err := yaml.Unmarshal(extra, &x); err != nil {
		return nil, fmt.Errorf("not a YAML mapping of roamd's config keys: %v", err)
	}
	for k, v := range x {
		if _, own := b[k]; own {
			if _, isMap := v.(map[string]any); !isMap || k == "load" {
				return nil, fmt.Errorf("%s is set by the emulated cluster itself", k)
			}
		}
		b[k] = merge(b[k], v)
	}
	return yaml.Marshal(b)
}

// merge is v over old: mappings key by key, anything else v.
func merge(old, v any) any {
	om, ok1 := old.(map[string]any)
	vm, ok2 := v.(map[string]any)
	if !ok1 || !ok2 {
		return v
	}
	for k, x := range vm {
		om[k] = merge(om[k], x)
	}
	return om
}
