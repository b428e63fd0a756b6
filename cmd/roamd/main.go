// Command roamd is the roam node agent. It only reads its flags and config
// and wires the agent together; everything else is in internal/agent.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"roam/internal/agent"
)

func main() {
	configPath := flag.String("config", "/etc/roam/roamd.yaml", "agent config file (YAML)")
	debug := flag.Bool("debug", false, "log debug messages")
	flag.Parse()

	level := slog.LevelInfo
	if *debug {
		level = slog.LevelDebug
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	raisePriority(agentNice)
	cfg, err := agent.LoadConfigFile(*configPath)
	if err != nil {
		fmt.Fprintf(os.Stderr, "roamd: %s: %v\n", *configPath, err)
		os.Exit(2)
	}
	p, err := parts(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "roamd: %v\n", err)
		os.Exit(1)
	}
	a, err := agent.New(cfg, p, logger)
	if err != nil {
		fmt.Fprintf(os.Stderr, "roamd: %v\n", err)
		os.Exit(1)
	}
	if err := a.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "roamd: %v\n", err)
		os.Exit(1)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	<-sig
	a.Close()
}

// agentNice is the agent's nice value. The agent, and the CRIU processes it
// starts, run ahead of the jobs on their node: a migration's dump competes
// with every job there, and each of its milliseconds is a millisecond the
// frozen job does not run. On a node loaded with 8 jobs a 6 MiB dump took
// 1.0-1.8 s at nice 0 and 0.4-1.0 s ahead of the jobs (on a node of 0.2 CPU). Jobs start at nice 0
// again (roam-init sets it), and CRIU restores a job's own nice.
const agentNice = -10

// raisePriority sets the nice value of every thread of this process (nice
// is per thread on Linux; threads made later inherit it from their maker).
// Without CAP_SYS_NICE it leaves the agent as it is.
func raisePriority(nice int) {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return
	}
	for _, t := range tasks {
		if tid, err := strconv.Atoi(t.Name()); err == nil {
			_ = syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice)
		}
	}
}
