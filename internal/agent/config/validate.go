package config

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"roam/internal/agent/decisions"
	"roam/internal/agent/observe"
	"roam/internal/agent/peer"
	"roam/internal/errkind"
	"roam/internal/load"
	"roam/internal/sched"
)

var nodeIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.-]{0,62}$`)

// hostnamePattern is a DNS name: dot-separated labels of letters, digits
// and '-'.
var hostnamePattern = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*\.?$`)

// Validate checks every field and names the first wrong one with the values
// it allows. Each check names its key as limits.Limits.Validate does.
func (c Config) Validate() error {
	metrics := func() (string, error) { return observe.CheckConfig(c.MetricsAddr, c.MetricsWebConfig) }
	for _, check := range []func() (string, error){
		c.checkAddrs, c.checkPaths, c.checkRanges, c.checkLists,
		c.Limits.Validate, c.Server.Validate, c.Jobs.Validate, c.Fence.Validate, c.Slurm.Validate, metrics, c.checkScheduler,
	} {
		if key, err := check(); err != nil {
			return errkind.New(peer.ErrConfig, "config: %s: %v", key, err)
		}
	}
	return nil
}

// checkAddrs checks the node's name, addresses and ports.
func (c Config) checkAddrs() (string, error) {
	adv := net.ParseIP(c.AdvertiseAddr)
	switch {
	case !nodeIDPattern.MatchString(c.NodeID):
		return "node_id", fmt.Errorf("%q is not allowed (letters, digits, '.', '-'; 1 to 63 characters)", c.NodeID)
	case !nodeIDPattern.MatchString(c.ClusterName):
		return "cluster_name", fmt.Errorf("%q is not allowed (letters, digits, '.', '-'; 1 to 63 characters)", c.ClusterName)
	case net.ParseIP(c.BindAddr) == nil:
		return "bind_addr", fmt.Errorf("%q is not an IP address", c.BindAddr)
	case c.AdvertiseAddr != "" && adv == nil:
		return "advertise_addr", fmt.Errorf("%q is not an IP address", c.AdvertiseAddr)
	case c.AdvertiseAddr != "" && (adv.IsUnspecified() || adv.IsMulticast()):
		return "advertise_addr", fmt.Errorf("%s cannot be reached by other nodes (an address of this host's interface is needed)", c.AdvertiseAddr)
	case c.GossipPort < 1 || c.GossipPort > 65535:
		return "gossip_port", fmt.Errorf("%d is out of range (1 to 65535)", c.GossipPort)
	case c.PeerPort < 1 || c.PeerPort > 65535 || c.PeerPort == c.GossipPort:
		return "peer_port", fmt.Errorf("%d is out of range (1 to 65535, not the gossip port)", c.PeerPort)
	}
	return "", nil
}

// checkPaths checks the files and directories the node uses.
func (c Config) checkPaths() (string, error) {
	switch {
	case c.SecretFile == "":
		return "secret_file", errors.New("empty (a file made by 'roam keygen')")
	case c.StateDir == "":
		return "state_dir", errors.New("empty (a directory path)")
	case c.Socket == "":
		return "socket", errors.New("empty (a unix socket path)")
	case c.InitPath != "" && !filepath.IsAbs(c.InitPath):
		return "init_path", fmt.Errorf("%q is not an absolute path", c.InitPath)
	case c.ImageDir != "" && !filepath.IsAbs(c.ImageDir):
		return "image_dir", fmt.Errorf("%q is not an absolute path", c.ImageDir)
	case c.CRIUPath != "" && !filepath.IsAbs(c.CRIUPath):
		return "criu_path", fmt.Errorf("%q is not an absolute path", c.CRIUPath)
	}
	return "", nil
}

// checkRanges checks the numbers outside the sections.
func (c Config) checkRanges() (string, error) {
	switch {
	case c.CRIUTimeout < 10*time.Second || c.CRIUTimeout > 24*time.Hour:
		return "criu_timeout", fmt.Errorf("%v is out of range (10s to 24h)", c.CRIUTimeout)
	case !(c.Capacity >= 0 && c.Capacity <= 4096): // NaN too
		return "capacity", fmt.Errorf("%v is out of range (0 for the host's cores, or 0.01 to 4096)", c.Capacity)
	case c.Load.Interval < 10*time.Millisecond || c.Load.Interval > time.Hour:
		return "load.interval", fmt.Errorf("%v is out of range (10ms to 1h)", c.Load.Interval)
	case c.Load.VectorSize < 1 || c.Load.VectorSize > 1024:
		return "load.vector_size", fmt.Errorf("%d is out of range (1 to 1024)", c.Load.VectorSize)
	case c.RecordDecisionsBytes < 0 || c.RecordDecisionsBytes > decisions.MaxBytes:
		return "record_decisions_bytes", fmt.Errorf("%d is out of range (0 for off, or up to %d)", c.RecordDecisionsBytes, decisions.MaxBytes)
	}
	return "", nil
}

// checkLists checks the keys whose values are parsed: the job cgroup,
// the lists, the load vector's policy.
func (c Config) checkLists() (string, error) {
	if j := c.JobCgroup; j != "" && j != "none" && (filepath.IsAbs(j) || filepath.Clean(j) != j || j == "." || strings.HasPrefix(j, "..")) {
		return "job_cgroup", fmt.Errorf("%q is not a clean relative cgroup path (e.g. roam), or none", j)
	}
	for _, d := range c.SharedDirs {
		if !filepath.IsAbs(d) {
			return "shared_dirs", fmt.Errorf("%q is not an absolute path", d)
		}
	}
	for _, j := range c.Join {
		if err := checkJoin(j); err != nil {
			return "join", fmt.Errorf("%q: %v", j, err)
		}
	}
	if _, err := load.ParsePolicy(c.Load.Policy); err != nil {
		return "load.policy", fmt.Errorf("%q is not allowed (fifo, beneficial)", c.Load.Policy)
	}
	return "", nil
}

// checkScheduler parses the policy the agent starts with.
func (c Config) checkScheduler() (string, error) {
	_, err := c.Policy()
	return "scheduler", err
}

// Policy is the scheduler's policy the node starts with: scheduler's
// built-in policy, or the policy file it names (read each time).
func (c Config) Policy() (*sched.Scheduler, error) {
	name := c.Scheduler
	if name == "" {
		name = sched.DefaultPolicy
	}
	if text, ok := sched.Builtin[name]; ok {
		return sched.ParsePolicy([]byte(text))
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fmt.Errorf("policy %s: not a built-in policy (%s) and not a readable file: %v", name, BuiltinPolicies(), err)
	}
	return sched.ParsePolicy(b)
}

// BuiltinPolicies names the built-in policies, sorted, for messages.
func BuiltinPolicies() string {
	var ns []string
	for n := range sched.Builtin {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return strings.Join(ns, ", ")
}
