package main

// The one place that builds the agent's real parts from its config.

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"sync"

	"roam/internal/agent"
	"roam/internal/cgroup"
	"roam/internal/ckpt"
	"roam/internal/job"
	"roam/internal/probe"
	"roam/internal/secret"
)

// parts builds the real parts: the CLI's unix socket, mutual TLS between
// agents with the cluster's secret, memberlist's own UDP and TCP, CRIU,
// roam-init and /proc, and the node's cgroup when it has one (emulated
// clusters).
func parts(cfg agent.Config) (agent.Parts, error) {
	sec, err := secret.ReadFile(cfg.SecretFile)
	if err != nil {
		return agent.Parts{}, err
	}
	tlsCfg, err := sec.TLSConfig(cfg.NodeID)
	if err != nil {
		return agent.Parts{}, err
	}
	var layout cgroup.Layout
	if cfg.Cgroup != "" {
		if layout, err = cgroup.Detect(); err != nil {
			return agent.Parts{}, err
		}
		if !layout.Exists(cfg.Cgroup) {
			return agent.Parts{}, fmt.Errorf("config: cgroup: %s does not exist under %s", cfg.Cgroup, layout)
		}
	}
	// Held by everyone here who starts a child (see ckpt.CRIU.ExecMu).
	execMu := &sync.Mutex{}
	criuPath := cfg.CRIUPath
	if criuPath == "" {
		criuPath = ckpt.DefaultPath()
	}
	launcher := job.Launcher{Init: cfg.InitPath, SpoolRoot: filepath.Join(cfg.StateDir, "spool"), ExecMu: execMu}
	if cfg.Cgroup != "" {
		for _, d := range layout.Dirs(cfg.Cgroup) {
			launcher.CgroupProcs = append(launcher.CgroupProcs, filepath.Join(d, "cgroup.procs"))
		}
	}
	api, err := agent.ListenAPI(cfg.Socket)
	if err != nil {
		return agent.Parts{}, errors.Join(errors.New("socket "+cfg.Socket), err)
	}
	return agent.Parts{
		API:          api,
		Transport:    agent.TLSTransport{Config: tlsCfg, Bind: net.JoinHostPort(cfg.BindAddr, strconv.Itoa(cfg.PeerPort))},
		GossipKey:    sec.GossipKey(),
		Checkpointer: &ckpt.Host{CRIU: ckpt.CRIU{Path: criuPath, ExecMu: execMu}, Layout: layout, Group: cfg.Cgroup},
		Processes:    launcher,
		Prober:       probe.Node{Layout: layout, Group: cfg.Cgroup},
	}, nil
}
