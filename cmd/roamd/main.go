// Command roamd is the roam node agent. It only reads its flags and config
// and wires the agent together; everything else is in internal/agent.
package main

import (
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
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

	cfg, err := agent.LoadConfigFile(*configPath)
	if err != nil {
		fmt.Fprintf(os.Stderr, "roamd: %s: %v\n", *configPath, err)
		os.Exit(2)
	}
	a, err := agent.New(cfg, logger, nil)
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
