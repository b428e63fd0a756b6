// Command roamd is the roam node agent. It only reads its flags and config
// and wires the agent together; everything else is in internal/agent.
package main

import (
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/spf13/cobra"

	"roam/internal/agent"
	"roam/internal/api"
	"roam/internal/docgen"
)

func main() { os.Exit(run(os.Args[1:])) }

// command is roamd's command line; its man page and completions are
// generated from it (roamd gendocs).
func command(code *int) *cobra.Command {
	var configPath string
	var debug, checkOnly, logJSON bool
	c := &cobra.Command{
		Use:   "roamd",
		Short: "the roam node agent",
		Long: `roamd is the roam node agent. It runs as root on every node of a roam
cluster: it joins the other agents through gossip, starts the jobs placed on
its node, and migrates them live (with CRIU) to wherever CPU and memory are
free. Jobs outlive the agent: a restarted agent takes them back.

SIGTERM or SIGINT stops the agent (its jobs run on). SIGHUP reads the config
again and checks it as --check-config does: a changed scheduler runs at once
(unless one was loaded with roam policy load), every other changed key is
logged as needing a restart, and a config that does not pass changes nothing.`,
		Version:       api.Version,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(*cobra.Command, []string) error {
			*code = serve(configPath, debug, checkOnly, logJSON)
			return nil
		},
	}
	c.Flags().StringVar(&configPath, "config", "/etc/roam/roamd.yaml", "agent config file (YAML)")
	c.Flags().BoolVar(&debug, "debug", false, "log debug messages")
	c.Flags().BoolVar(&logJSON, "log-json", false, "log JSON, one record a line (under systemd, each behind its priority)")
	c.Flags().BoolVar(&checkOnly, "check-config", false, "check the config, the secret file and the addresses, print what the agent would use, and exit (0: usable, 2: not)")
	c.SetVersionTemplate("roamd {{.Version}}\n")
	c.CompletionOptions.HiddenDefaultCmd = true
	c.AddCommand(docgen.Command(c, "8"))
	return c
}

func run(args []string) int {
	code := 0
	c := command(&code)
	c.SetArgs(args)
	if err := c.Execute(); err != nil {
		fmt.Fprintf(os.Stderr, "roamd: %v\n", err)
		return 2
	}
	return code
}

// serve checks the config and runs the agent until SIGTERM or SIGINT
// (SIGHUP reloads the config); it returns the exit status.
func serve(configPath string, debug, checkOnly, logJSON bool) int {
	level := slog.LevelInfo
	if debug {
		level = slog.LevelDebug
	}
	logger := newLogger(os.Stderr, level, logJSON, toJournal())

	cfg, w, err := check(configPath)
	if err != nil {
		fmt.Fprintf(os.Stderr, "roamd: %s: %v\n", configPath, err)
		return 2
	}
	if checkOnly {
		fmt.Print(w.summary(cfg))
		return 0
	}
	raisePriority(agentNice)
	p, err := w.parts(cfg, logger)
	if err != nil {
		fmt.Fprintf(os.Stderr, "roamd: %v\n", err)
		return 1
	}
	web := w.observer(cfg, &p, logger)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	a, err := agent.New(cfg, p, logger)
	if err != nil {
		fmt.Fprintf(os.Stderr, "roamd: %v\n", err)
		return 1
	}
	if err := a.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "roamd: %v\n", err)
		return 1
	}
	if err := web.Start(source(a), p.Registry); err != nil {
		fmt.Fprintf(os.Stderr, "roamd: %v\n", err)
		a.Close()
		return 1
	}
	// The API listens now: systemd's Type=notify starts what waits for
	// roamd (systemctl start returns) only at this line. The signals are
	// caught since before the start: a reload sent as soon as READY=1
	// came (systemctl reload, a script) had killed roamd, SIGHUP's
	// default, before the handler was in place.
	notify(logger, daemon.SdNotifyReady)
	for {
		select {
		case s := <-sig:
			if s == syscall.SIGHUP {
				notify(logger, daemon.SdNotifyReloading)
				reload(a, configPath, logger)
				notify(logger, daemon.SdNotifyReady)
				continue
			}
		case <-a.Done(): // it left the cluster (roam node remove)
		}
		notify(logger, daemon.SdNotifyStopping)
		web.Close()
		a.Close()
		return 0
	}
}

// notify tells systemd (Type=notify) the agent's state, when it runs
// under systemd ($NOTIFY_SOCKET); elsewhere it does nothing.
func notify(logger *slog.Logger, state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		logger.Warn("systemd notification", "state", state, "err", err)
	}
}

// reload is SIGHUP: the config file is read and checked again as at the
// start; what of it can change while the agent runs is taken, and what
// needs a restart is said. A config that does not pass changes nothing.
func reload(a *agent.Agent, configPath string, logger *slog.Logger) {
	cfg, _, err := check(configPath)
	if err != nil {
		logger.Error("SIGHUP: config not reloaded, nothing changed", "config", configPath, "err", err)
		return
	}
	took, restart := a.Reload(cfg)
	logger.Info("SIGHUP: config reloaded", "config", configPath, "took", strings.Join(took, ", "), "needs_restart", strings.Join(restart, ", "))
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
