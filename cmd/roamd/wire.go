package main

// The one place that builds the agent's real parts from its config.

import (
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"roam/internal/agent"
	"roam/internal/agent/config"
	"roam/internal/agent/launch"
	"roam/internal/agent/observe"
	"roam/internal/agent/slurmstep"
	"roam/internal/agent/transport"
	"roam/internal/api"
	"roam/internal/cgroup"
	"roam/internal/ckpt"
	"roam/internal/job"
	"roam/internal/migrate"
	"roam/internal/probe"
	"roam/internal/rootdir"
	"roam/internal/secret"

	"github.com/prometheus/client_golang/prometheus"
)

// world is what the config names on this host, checked: the secret and
// its TLS config, the cgroup layout, CRIU and roam-init.
type world struct {
	sec    secret.Secret
	tls    *tls.Config
	layout cgroup.Layout
	// jobs holds every job's cgroup; nil when the host has no cgroup
	// controllers to use (the config's job_cgroup none, or none found).
	jobs     *cgroup.Jobs
	noGroups string // why jobs is nil
	criuPath string
	shared   []string // the shared directories, defaulted
}

// check reads the config and everything it names, and fills in the
// advertised address; its error is one line naming what is wrong. Nothing
// is opened or listened on.
func check(path string) (config.Config, world, error) {
	var w world
	cfg, err := config.LoadFile(path)
	if err != nil {
		return cfg, w, err
	}
	if w.sec, err = secret.ReadFile(cfg.SecretFile); err != nil {
		return cfg, w, fmt.Errorf("config: secret_file: %w", err)
	}
	if cfg, err = config.ResolveAdvertise(cfg, config.HostRoutes()); err != nil {
		return cfg, w, err
	}
	if w.tls, err = w.sec.TLSConfig(cfg.NodeID); err != nil {
		return cfg, w, err
	}
	layout, lerr := cgroup.Detect()
	w.layout = layout
	if cfg.Cgroup != "" {
		if lerr != nil {
			return cfg, w, lerr
		}
		if !layout.Exists(cfg.Cgroup) {
			return cfg, w, fmt.Errorf("config: cgroup: %s does not exist under %s", cfg.Cgroup, layout)
		}
	}
	parent := cfg.JobCgroup
	if parent == "" {
		parent = cfg.Cgroup
	}
	if parent == "" {
		parent = "roam"
	}
	switch {
	case parent == "none":
		w.noGroups = "job_cgroup is none"
	case lerr != nil:
		w.noGroups = lerr.Error()
		if cfg.JobCgroup != "" {
			return cfg, w, fmt.Errorf("config: job_cgroup: %s: %w", cfg.JobCgroup, lerr)
		}
	default:
		w.jobs = &cgroup.Jobs{Layout: layout, Parent: parent}
	}
	// What Start makes of them must be root's alone (rootdir.Ensure):
	// the parts that exist are checked here, nothing is made.
	if err := rootdir.Check(cfg.StateDir); err != nil {
		return cfg, w, fmt.Errorf("config: state_dir: %w", err)
	}
	if err := rootdir.Check(cfg.ImageDirOrDefault()); err != nil {
		return cfg, w, fmt.Errorf("config: image_dir: %w", err)
	}
	if fi, err := os.Stat(cfg.InitPath); err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
		return cfg, w, fmt.Errorf("config: init_path: %s is not an executable file (roam-init, installed beside roamd)", cfg.InitPath)
	}
	w.shared = cfg.SharedDirs
	if len(w.shared) == 0 {
		mi, _ := os.ReadFile("/proc/self/mountinfo")
		w.shared = ckpt.NetworkMounts(string(mi))
	}
	w.criuPath = cfg.CRIUPath
	if w.criuPath == "" {
		w.criuPath = ckpt.DefaultPath()
	}
	return cfg, w, nil
}

// summary is what --check-config prints: what the agent would use.
func (w world) summary(cfg config.Config) string {
	var b strings.Builder
	adv, _ := cfg.Advertise() // resolved by check
	fmt.Fprintf(&b, "node %s: config usable\n", cfg.NodeID)
	fmt.Fprintf(&b, "  advertises  %s (gossip %d udp+tcp, peers %d tcp); listens on %s\n", adv, cfg.GossipPort, cfg.PeerPort, cfg.BindAddr)
	join := "none (the first node: others join it)"
	if len(cfg.Join) > 0 {
		join = strings.Join(cfg.Join, ", ")
	}
	fmt.Fprintf(&b, "  joins       %s\n", join)
	if cfg.MetricsAddr != "" {
		auth := "plain HTTP, no authentication (metrics_web_config)"
		if cfg.MetricsWebConfig != "" {
			auth = "TLS and authentication of " + cfg.MetricsWebConfig
		}
		users := "jobs counted by node and state (metrics_job_users: false)"
		if cfg.MetricsJobUsers {
			users = "jobs counted by node, user and state: whoever reaches it reads every user's name"
		}
		fmt.Fprintf(&b, "  metrics     %s: /metrics and the web view, %s; %s\n", cfg.MetricsAddr, auth, users)
	}
	fmt.Fprintf(&b, "  secret      %s (private)\n", cfg.SecretFile)
	fmt.Fprintf(&b, "  state       %s, socket %s\n", cfg.StateDir, cfg.Socket)
	fmt.Fprintf(&b, "  roam-init   %s\n", cfg.InitPath)
	if d := inJobTmp(cfg.InitPath); d != "" {
		fmt.Fprintf(&b, "  roam-init   is in %s, which each job has its own of: jobs cannot move (install it elsewhere)\n", d)
	}
	fmt.Fprintf(&b, "  job /tmp    each job's /tmp and /var/tmp its own, a tmpfs of up to %s each (limits.job_tmp_bytes), moving with it\n", api.Bytes(cfg.Limits.JobTmpBytes))
	if err := job.UserNSAllowed(cfg.InitPath, nil); err != nil {
		fmt.Fprintf(&b, "  user jobs   in the host's user namespace (%v): they migrate only where root holds CAP_SYS_RESOURCE\n", err)
	} else {
		fmt.Fprintf(&b, "  user jobs   in user namespaces of their own (root-owned, every id mapped to itself), where root's CRIU moves them\n")
	}
	mem := "none"
	if cfg.Jobs.DefaultMemBytes > 0 {
		mem = api.Bytes(cfg.Jobs.DefaultMemBytes)
	}
	pids := fmt.Sprint(cfg.Jobs.Pids, " processes")
	if w.jobs != nil && w.jobs.Layout.Pids == "" {
		pids = "no bound on processes (no pids controller)"
	}
	fmt.Fprintf(&b, "  jobs        --cpus %v and --mem %s when a run gives none; %s each\n", cfg.Jobs.DefaultCPUs, mem, pids)
	if w.jobs != nil {
		fmt.Fprintf(&b, "  job groups  %s/jobs/ID (%s)\n", w.jobs.Parent, w.jobs.Layout)
	} else {
		fmt.Fprintf(&b, "  job groups  none (%s): jobs stay in roamd's cgroup and a restart of its service may stop them\n", w.noGroups)
	}
	shared := "none: jobs with open files or a working directory do not migrate (set shared_dirs)"
	if len(w.shared) > 0 {
		shared = strings.Join(w.shared, ", ")
	}
	fmt.Fprintf(&b, "  shared      %s\n", shared)
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil && !cgroup.FavorDynMods(string(mi)) {
		fmt.Fprintf(&b, "  cgroups     no hierarchy mounted with favordynmods: each migration waits 10-20 ms more, frozen (docs/deploy.md)\n")
	}
	c := ckpt.CRIU{Path: w.criuPath, ExecMu: &sync.Mutex{}}
	if v, err := c.Version(); err != nil {
		fmt.Fprintf(&b, "  criu        %s does not answer (%v): jobs run but do not migrate\n", w.criuPath, err)
	} else {
		fmt.Fprintf(&b, "  criu        %s, version %d.%d.%d\n", w.criuPath, v/10000, v/100%100, v%100)
		if ok, why := ckpt.LazyInUserNS(w.criuPath); !ok {
			fmt.Fprintf(&b, "  lazy        not of jobs in user namespaces of their own (%v): they arrive here eagerly\n", why)
		}
	}
	return b.String()
}

// inJobTmp is the job's own scratch directory (migrate.JobTmp) that path
// is in, or "": roam-init hides what the node has there from the job, and
// a roam-init of the node's there cannot run again in a user's job (-U),
// nor can CRIU find its file to move the job.
func inJobTmp(path string) string {
	for _, d := range migrate.JobTmp {
		if migrate.Under(path, d) {
			return d
		}
	}
	return ""
}

// parts builds the real parts: the CLI's unix socket, mutual TLS between
// agents with the cluster's secret, memberlist's own UDP and TCP, CRIU,
// roam-init and /proc, and the node's cgroup when it has one (emulated
// clusters).
func (w world) parts(cfg config.Config, log *slog.Logger) (agent.Parts, error) {
	// Held by everyone here who starts a child (see ckpt.CRIU.ExecMu).
	execMu := &sync.Mutex{}
	// Users' jobs run in user namespaces of their own wherever the host
	// allows them (see cinit/roam-init.c, -U).
	noUserNS := job.UserNSAllowed(cfg.InitPath, execMu)
	prober := probe.Node{Layout: w.layout, Group: cfg.Cgroup}
	jobMem := prober.JobMemory()
	if cfg.Jobs.MemoryBytes > 0 {
		jobMem = cfg.Jobs.MemoryBytes
	}
	if w.jobs != nil {
		w.jobs.Cores, w.jobs.Pids, w.jobs.Memory = cfg.Capacity, cfg.Jobs.Pids, jobMem
		if w.jobs.Cores <= 0 {
			w.jobs.Cores = float64(runtime.NumCPU())
		}
	}
	launcher := job.Launcher{Init: cfg.InitPath, SpoolRoot: filepath.Join(cfg.StateDir, "spool"), ExecMu: execMu, Cgroups: w.jobs, UserNS: noUserNS == nil,
		Template: &job.Template{}, TmpBytes: cfg.Limits.JobTmpBytes}
	var ask launch.SlurmAsk
	var slurmRestore func(uint32, string) (map[string]string, error)
	var steps *slurmstep.Steps // nil: the node serves no Slurm jobs
	if cfg.Slurm.Enabled {
		launcher.SlurmGroups, ask, slurmRestore = slurmstep.Groups(w.layout, cfg.Slurm), slurmstep.Ask(cfg.Slurm, execMu), slurmstep.Roots(w.layout, cfg.Slurm)
		steps = slurmstep.New(cfg.Slurm, cfg.NodeID, log)
	}
	// Root's CRIU believes the kernel facts it cached there.
	if err := ckpt.EnsureKerndat(ckpt.KerndatDir); err != nil {
		return agent.Parts{}, fmt.Errorf("CRIU's cache of kernel facts: %w", err)
	}
	if d := inJobTmp(cfg.InitPath); d != "" {
		log.Warn("roam-init is in a directory each job has its own of: jobs cannot move (install it elsewhere)", "init_path", cfg.InitPath, "dir", d)
	}
	// CRIU's tar compresses a job's own /tmp with roam's fast gzip
	// (ckpt/gzip.go); without it, with the system's, and the job stays
	// frozen meanwhile.
	if err := ckpt.FastGzip(filepath.Join(cfg.StateDir, "criu-path")); err != nil {
		log.Warn("CRIU compresses jobs' /tmp with the system's gzip, slower", "err", err)
	}
	// CRIU opens the cgroup hierarchies in a yard made once, rather than
	// mounting them again for every dump and restore (ckpt/yard.go);
	// without one it mounts them itself, slower.
	yard, err := ckpt.EnsureYard(ckpt.YardDir)
	if err != nil {
		log.Warn("CRIU mounts the cgroup hierarchies for each dump and restore", "err", err)
	}
	lazyUserNS, _ := ckpt.LazyInUserNS(w.criuPath) // why not: in Support's line
	api, err := transport.ListenAPI(cfg.Socket)
	if err != nil {
		return agent.Parts{}, errors.Join(errors.New("socket "+cfg.Socket), err)
	}
	return agent.Parts{
		API:           api,
		Transport:     transport.TLS{Config: w.tls, Bind: net.JoinHostPort(cfg.BindAddr, strconv.Itoa(cfg.PeerPort))},
		GossipKey:     w.sec.GossipKey(),
		CheckpointKey: w.sec.CheckpointKey(),
		Checkpointer:  steps.Checkpointer(withHold(&ckpt.Host{CRIU: ckpt.CRIU{Path: w.criuPath, ExecMu: execMu, Timeout: cfg.CRIUTimeout, Yard: yard}, Layout: w.layout, Jobs: w.jobs, Shared: w.shared, GhostLimit: cfg.Limits.GhostBytes, UserNS: noUserNS == nil, NoUserNS: noUserNS, SlurmRoots: slurmRestore})),
		Processes:     steps.Processes(launcher),
		UserNS:        launcher.UserNS,
		LazyUserNS:    lazyUserNS,
		Host:          host(w.criuPath, execMu),
		Prober:        prober,
		Slurm:         ask,
		JobMemory:     jobMem,
	}, nil
}

// observer makes the metrics_addr listener (package observe) and gives
// the agent what it needs of it: a registry both serve, and the route of
// the roam socket that mints web tokens. It listens once the agent has
// started (Start with source).
func (w world) observer(cfg config.Config, p *agent.Parts, log *slog.Logger) *observe.Server {
	adv, _ := cfg.Advertise() // resolved by check
	s := observe.New(observe.Config{Addr: cfg.MetricsAddr, WebConfigFile: cfg.MetricsWebConfig, Advertise: adv.String(), JobUsers: cfg.MetricsJobUsers}, log)
	p.Registry, p.Routes = prometheus.NewRegistry(), s.SocketRoutes
	return s
}

// source is what the web view and the scrape ask the agent: its
// membership, and every node's jobs and decisions as root sees them.
func source(a *agent.Agent) observe.Source {
	root := agent.Caller{}
	return observe.Source{
		Nodes:  a.Nodes,
		Jobs:   func() []api.Job { return a.PS(root, true) },
		Events: func(since time.Time) []api.Event { return a.Events(root, since) },
	}
}
