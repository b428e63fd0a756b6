// Package config is roamd's config file: every key (Config), its
// default, its check (Validate) and its reading (Parse, LoadFile), and
// the address the node advertises (ResolveAdvertise). It reads files
// (the config, a policy file) and, in HostRoutes, the host's network
// stack; it starts nothing and holds no lock. Changing a key is
// docs/config.md's business too, and cmd/roamd's check tests list every
// key.
package config

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"roam/internal/agent/limits"
	"roam/internal/agent/peer"
	"roam/internal/errkind"
	"roam/internal/fence"
	"roam/internal/slurm"
	"roam/internal/yamlerr"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"roam/internal/api"
	"roam/internal/load"
)

// The defaults of a real node, named once.
const (
	// DefaultGossipPort is memberlist's port (its own default).
	DefaultGossipPort = 7946
	// DefaultPeerPort is the TLS port for agent-to-agent requests.
	DefaultPeerPort = 7947
	// DefaultSocket is the CLI's unix socket on a real node.
	DefaultSocket = api.DefaultSocket
	// DefaultStateDir is where a real node keeps its state.
	DefaultStateDir = "/var/lib/roam"
)

// Config is what roamd reads from its YAML config file.
type Config struct {
	// NodeID names the node; unique in the cluster; letters, digits, '-', '.'.
	NodeID string `yaml:"node_id"`
	// ClusterName names the cluster, the same on every node: every
	// checkpoint file is bound to it, and no other cluster restarts one
	// (even one with the same secret, as a test cluster beside a
	// production one may have).
	ClusterName string `yaml:"cluster_name"`
	// BindAddr is the IP address the agent listens on for gossip and peers.
	BindAddr string `yaml:"bind_addr"`
	// AdvertiseAddr is the IP address other nodes reach this one at; empty
	// means bind_addr when that is a specific address, else the source
	// address of the route to the first join peer (ResolveAdvertise).
	AdvertiseAddr string `yaml:"advertise_addr"`
	// GossipPort is memberlist's UDP and TCP port.
	GossipPort int `yaml:"gossip_port"`
	// PeerPort is the TLS port for agent-to-agent requests.
	PeerPort int `yaml:"peer_port"`
	// Join lists other agents to join through: IP addresses or DNS names
	// (a name with several addresses joins through each), each with an
	// optional :port (the gossip port when left out).
	Join []string `yaml:"join"`
	// SecretFile holds the cluster secret (see `roam keygen`).
	SecretFile string `yaml:"secret_file"`
	// StateDir is the node's own directory for its state.
	StateDir string `yaml:"state_dir"`
	// Socket is the unix socket the CLI talks to.
	Socket string `yaml:"socket"`
	// Capacity is the node's CPU capacity in cores; 0 means the host's
	// core count.
	Capacity float64 `yaml:"capacity"`
	// Cgroup is the node's cgroup relative to the controllers' mounts
	// (emulated nodes); empty means the whole host.
	Cgroup string `yaml:"cgroup"`
	// JobCgroup is the group under which every job gets a cgroup of its
	// own, PARENT/jobs/ID, relative to the controllers' mounts. Empty means
	// the node's cgroup when it has one (emulated nodes), else "roam": a
	// top-level group of roamd's own beside the service manager's, so that
	// stopping or restarting roamd's service leaves the jobs alone. "none"
	// keeps jobs in roamd's cgroup.
	JobCgroup string `yaml:"job_cgroup"`
	// InitPath is roam-init, PID 1 of every job; empty means next to roamd.
	InitPath string `yaml:"init_path"`
	// ImageDir is where migration images are written; empty means
	// state_dir/images. A tmpfs makes migrations faster.
	ImageDir string `yaml:"image_dir"`
	// CRIUPath is the criu binary migration runs (through its RPC
	// interface); empty means roam's own build if installed, else criu
	// from PATH.
	CRIUPath string `yaml:"criu_path"`
	// CRIUTimeout bounds one CRIU dump (a lazy one until its images are
	// written) or restore: a CRIU that has not answered by then is
	// killed, the migration fails and the job runs on at the source.
	CRIUTimeout time.Duration `yaml:"criu_timeout"`
	// SharedDirs are the directories every node mounts at the same path
	// (a shared home, a cluster filesystem): a job migrates only while
	// its open files and working directories are in them. Empty means the
	// network and cluster filesystems (nfs, cifs, ceph, lustre, ...)
	// mounted on this host.
	SharedDirs []string `yaml:"shared_dirs"`
	// Scheduler is the policy the node starts with: a built-in name
	// (static, balance, ushering, threshold, mosix, feedback) or a policy file;
	// empty means mosix. `roam policy load` replaces it at run time.
	Scheduler string `yaml:"scheduler"`
	// Load configures the load vector and its dissemination.
	Load LoadConfig `yaml:"load"`
	// Limits bound what a user's requests may cost this node.
	Limits limits.Limits `yaml:"limits"`
	// Server bounds the connections of the CLI's socket and the peer port.
	Server limits.Server `yaml:"server"`
	// Jobs is what each job gets here: the requests of a run that gives
	// none (roam run --cpus, --mem), the processes of one job, and the
	// memory this node admits jobs' requests up to.
	Jobs limits.Jobs `yaml:"jobs"`
	// Fence is how long a node runs a job its home could restart while
	// it cannot reach that home (lease, then kill), and how long past
	// that a home waits before it restarts it (margin): the same on
	// every node (package fence, docs/deploy.md).
	Fence fence.Config `yaml:"fence"`
	// Slurm is how the node serves runs inside Slurm allocations
	// (docs/slurm.md): off by default.
	Slurm slurm.Config `yaml:"slurm"`
	// MetricsAddr is the TCP host:port of the scrape and the web view
	// (package observe), empty: none; MetricsWebConfig an exporter-toolkit
	// web config file for it (TLS, basic auth); MetricsJobUsers counts
	// the scrape's jobs by user too.
	MetricsAddr      string `yaml:"metrics_addr"`
	MetricsWebConfig string `yaml:"metrics_web_config"`
	MetricsJobUsers  bool   `yaml:"metrics_job_users"`
	// RecordDecisionsBytes, when not 0, records each scheduling round's
	// inputs and decision in state_dir/decisions.jsonl up to this many
	// bytes (package decisions; internal/sim replays them); 0, the
	// default: off.
	RecordDecisionsBytes int64 `yaml:"record_decisions_bytes"`
}

// LoadConfig is the load-information part of the config (seed 000 §3.1).
type LoadConfig struct {
	// Interval is how often the node sends its own load to two nodes.
	Interval time.Duration `yaml:"interval"`
	// VectorSize is the number of entries in the load vector.
	VectorSize int `yaml:"vector_size"`
	// Policy is the vector's update policy: fifo or beneficial.
	Policy string `yaml:"policy"`
}

// Changes lists the keys whose values differ between two configs, by
// their dotted names (load.interval), in the order of the fields.
func Changes(a, b Config) []string {
	var out []string
	var walk func(x, y reflect.Value, prefix string)
	walk = func(x, y reflect.Value, prefix string) {
		for i := range x.NumField() {
			f := x.Type().Field(i)
			k := prefix + strings.Split(f.Tag.Get("yaml"), ",")[0]
			if f.Type.Kind() == reflect.Struct && strings.HasPrefix(f.Type.PkgPath(), "roam/") {
				walk(x.Field(i), y.Field(i), k+".")
			} else if !reflect.DeepEqual(x.Field(i).Interface(), y.Field(i).Interface()) {
				out = append(out, k)
			}
		}
	}
	walk(reflect.ValueOf(a), reflect.ValueOf(b), "")
	return out
}

// ImageDirOrDefault is where migration images go: image_dir, or
// state_dir/images.
func (c Config) ImageDirOrDefault() string {
	if c.ImageDir != "" {
		return c.ImageDir
	}
	return filepath.Join(c.StateDir, "images")
}

// Default returns a config for a real node, with every default set.
func Default() Config {
	host, _ := os.Hostname()
	return Config{
		NodeID:      host,
		ClusterName: "roam",
		BindAddr:    "0.0.0.0",
		GossipPort:  DefaultGossipPort,
		PeerPort:    DefaultPeerPort,
		SecretFile:  "/etc/roam/secret",
		StateDir:    DefaultStateDir,
		Socket:      DefaultSocket,
		InitPath:    defaultInit(),
		Load: LoadConfig{
			Interval:   load.DefaultInterval,
			VectorSize: load.DefaultVectorSize,
			Policy:     string(load.PolicyFIFO),
		},
		Limits:      limits.Default(),
		Server:      limits.DefaultServer(),
		Jobs:        limits.DefaultJobs(),
		Fence:       fence.DefaultConfig(),
		CRIUTimeout: 10 * time.Minute,
	}
}

// LoadFile reads a YAML config over the defaults and validates it. An
// unknown key is an error, so a typo does not pass silently.
func LoadFile(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, errkind.New(peer.ErrConfig, "config: %v", err)
	}
	return Parse(b)
}

// Parse reads YAML over the defaults and validates it.
func Parse(b []byte) (Config, error) {
	c := Default()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&c); err != nil && !errors.Is(err, io.EOF) {
		return Config{}, errkind.New(peer.ErrConfig, "config: %s", yamlerr.Message(b, err, yamlForms))
	}
	return c, c.Validate()
}

// yamlForms says what each Go type of the config is written as.
var yamlForms = map[string]string{
	"time.Duration": "a duration (e.g. 30s, 10m, 1h)", "int": "a whole number", "int64": "a whole number",
	"float64": "a number", "string": "a string", "[]string": "a list (e.g. [a, b])", "bool": "true or false",
	"config.Config": "a section of keys", "config.LoadConfig": "a section of keys", "limits.Limits": "a section of keys",
	"limits.Server": "a section of keys", "limits.Jobs": "a section of keys", "fence.Config": "a section of keys", "slurm.Config": "a section of keys",
}

// Marshal renders the config as YAML (for `roam cluster up`).
func (c Config) Marshal() []byte {
	b, _ := yaml.Marshal(c)
	return b
}

// defaultInit is roam-init beside the running roamd (a build tree), else
// where `make install` and the package put it: PREFIX/libexec/roam beside
// PREFIX/sbin/roamd.
func defaultInit() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	dir := filepath.Dir(exe)
	beside := filepath.Join(dir, "roam-init")
	if _, err := os.Stat(beside); err == nil {
		return beside
	}
	return filepath.Join(filepath.Dir(dir), "libexec", "roam", "roam-init")
}
