package slurm

import (
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
)

// Config is roamd's slurm section: whether the node serves `roam run`s
// inside Slurm allocations, and where it finds Slurm's tools and groups.
type Config struct {
	// Enabled lets a run name the Slurm job it serves (SLURM_JOB_ID);
	// off, such a run is refused, and every run is placed as on a node
	// Slurm does not manage.
	Enabled bool `yaml:"enabled"`
	// Scontrol is the scontrol the agent asks the controller with; empty
	// means scontrol from PATH.
	Scontrol string `yaml:"scontrol"`
	// Conf is the slurm.conf scontrol reads (SLURM_CONF); empty means
	// Slurm's default.
	Conf string `yaml:"conf"`
	// Node is this node's name in Slurm (slurm.conf's NodeName); empty
	// means the node's roam node_id. The agents tell it each other, so
	// that an allocation's node list names roam's nodes.
	Node string `yaml:"node"`
	// Cgroup is Slurm's own group on this node, relative to each
	// hierarchy's mount (the freezer's, memory's, cpuacct's under v1):
	// where slurmd makes its uid_U/job_J/step_S groups. Empty means
	// "slurm", cgroup/v1's default of a node with one slurmd.
	Cgroup string `yaml:"cgroup"`
	// Spool is slurmd's SlurmdSpoolDir on this node, where each job
	// step's slurmstepd has its socket (%n stands for the node's Slurm
	// name, as in slurm.conf): the agent asks a job's extern step there
	// to adopt each process it starts or restores in the job, and to read
	// its count when one ends (package stepd). Empty means
	// DefaultSpool.
	Spool string `yaml:"spool"`
}

// DefaultSpool is Slurm's default SlurmdSpoolDir.
const DefaultSpool = "/var/spool/slurmd"

// nodeNamePattern is a Slurm node name as roam accepts it: a host name's
// letters.
var nodeNamePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$`)

// ValidNode checks a Slurm node name, from the config or a peer.
func ValidNode(n string) error {
	if !nodeNamePattern.MatchString(n) {
		return fmt.Errorf("%q is not a node name (letters, digits, '.', '_', '-'; 1 to 63 characters)", trim(n))
	}
	return nil
}

// Validate names the first wrong key, as the config's other sections do.
func (c Config) Validate() (string, error) {
	switch {
	case c.Scontrol != "" && !filepath.IsAbs(c.Scontrol):
		return "slurm.scontrol", fmt.Errorf("%q is not an absolute path", trim(c.Scontrol))
	case c.Conf != "" && !filepath.IsAbs(c.Conf):
		return "slurm.conf", fmt.Errorf("%q is not an absolute path", trim(c.Conf))
	case c.Node != "" && ValidNode(c.Node) != nil:
		return "slurm.node", ValidNode(c.Node)
	case c.Spool != "" && (!filepath.IsAbs(c.Spool) || filepath.Clean(c.Spool) != c.Spool):
		return "slurm.spool", fmt.Errorf("%q is not a clean absolute path", trim(c.Spool))
	case c.Cgroup != "" && (filepath.IsAbs(c.Cgroup) || filepath.Clean(c.Cgroup) != c.Cgroup || strings.HasPrefix(c.Cgroup, "..")):
		return "slurm.cgroup", fmt.Errorf("%q is not a clean path relative to the hierarchies' mounts (e.g. slurm)", trim(c.Cgroup))
	}
	return "", nil
}

// NodeName is this node's Slurm name: Node, or the roam node id.
func (c Config) NodeName(nodeID string) string {
	if c.Node != "" {
		return c.Node
	}
	return nodeID
}

// CgroupOrDefault is Cgroup, or "slurm".
func (c Config) CgroupOrDefault() string {
	if c.Cgroup != "" {
		return c.Cgroup
	}
	return "slurm"
}

// SpoolDir is this node's spool: Spool, or DefaultSpool, with %n replaced
// by node (its Slurm name).
func (c Config) SpoolDir(node string) string {
	s := c.Spool
	if s == "" {
		s = DefaultSpool
	}
	return strings.ReplaceAll(s, "%n", node)
}
