// Package cli is the roam command line: it parses flags, finds the agent to
// talk to, calls it (or, for `roam cluster`, the emulated-cluster code) and
// prints what comes back. It holds no cluster logic of its own.
package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/spf13/cobra"

	"roam/internal/api"
	"roam/internal/docgen"
	"roam/internal/emu"
)

// env holds the global flags.
type env struct {
	cluster string
	node    string
	socket  string
	json    bool // --json: print JSON (output.go)
	out     io.Writer
	errOut  io.Writer
	// outMu orders what goroutines print at once (a sweep's jobs).
	outMu sync.Mutex
}

// Main runs the CLI and returns the process exit code.
func Main(args []string) int { return run(args, os.Stdout, os.Stderr) }

// run is Main writing to out and errOut.
func run(args []string, out, errOut io.Writer) int {
	e := &env{out: out, errOut: errOut}
	root := e.rootCmd()
	root.SetArgs(args)
	root.SetOut(out) // help and completion too
	root.SetErr(errOut)
	cmd, err := root.ExecuteC()
	if err == nil {
		return 0
	}
	var ec exitCode
	if errors.As(err, &ec) {
		return int(ec)
	}
	fmt.Fprintf(e.errOut, "roam: %v\n", err)
	if cmd != nil && cmd.Annotations[exitWithJobs] != "" {
		return 255 // roam's own failure, never a job's status
	}
	return 1
}

// rootCmd is roam with every command.
func (e *env) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "roam",
		Short: "roam: a single-system-image cluster in user space",
		Long: `roam: a single-system-image cluster in user space. roam run starts
processes on the best nodes and they move, live, to wherever CPU and memory
are free. Every command takes --json, for scripts (docs/scripting.md).`,
		Version:       api.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return e.checkJSON(cmd)
		},
	}
	root.SetVersionTemplate("roam {{.Version}}\n")
	root.PersistentFlags().StringVar(&e.cluster, "cluster", envOr("ROAM_CLUSTER", "roam"), "emulated cluster name ($ROAM_CLUSTER)")
	root.PersistentFlags().StringVar(&e.node, "node", os.Getenv("ROAM_NODE"), "talk to node K of the emulated cluster ($ROAM_NODE)")
	root.PersistentFlags().StringVar(&e.socket, "socket", os.Getenv("ROAM_SOCKET"), "agent socket ($ROAM_SOCKET; default: the local agent's)")
	root.PersistentFlags().BoolVar(&e.json, "json", false, "print JSON for scripts: one value, or one object a line for a stream (docs/scripting.md)")
	root.AddCommand(e.toolCmds()...)
	root.AddCommand(e.nodesCmd(), e.nodeCmd(), e.statsCmd(), e.keygenCmd(),
		e.runCmd(), e.psCmd(), e.killCmd(), e.purgeCmd(), e.migrateCmd(), e.logsCmd(), e.attachCmd(),
		e.checkpointCmd(), e.restartCmd(),
		e.policyCmd(), e.eventsCmd(), e.topCmd(), e.webCmd(), docgen.Command(root, "1"))
	docgen.AddSection(root, "EXIT STATUS", otherExitStatuses)
	withSections(root)
	return root
}

// exitCode ends the CLI with a status and no message.
type exitCode int

func (c exitCode) Error() string { return "exit status " + strconv.Itoa(int(c)) }

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// client finds the agent to talk to: --socket; else node --node of the
// emulated cluster; else the local agent's socket; else node 1 of the
// emulated cluster, when one is up.
func (e *env) client() (*api.Client, error) {
	if e.socket != "" {
		return api.NewClient(e.socket), nil
	}
	if e.node != "" {
		return e.nodeClient(e.node)
	}
	if _, err := os.Stat(api.DefaultSocket); err == nil {
		return api.NewClient(api.DefaultSocket), nil
	}
	if _, err := emu.Load(e.cluster); err == nil {
		return e.nodeClient("1")
	}
	return nil, fmt.Errorf("%w: nothing at %s and no emulated cluster %q (start roamd, or 'roam cluster up')", api.ErrNoAgent, api.DefaultSocket, e.cluster)
}

func (e *env) nodeClient(id string) (*api.Client, error) {
	st, err := emu.Load(e.cluster)
	if err != nil {
		return nil, err
	}
	for _, n := range st.Nodes {
		if n.ID == id {
			return api.NewClient(n.Socket), nil
		}
	}
	return nil, fmt.Errorf("--node: node %q is not in cluster %q (it has %d nodes)", id, e.cluster, len(st.Nodes))
}

// roamdPath finds roamd next to the roam binary, else on PATH.
func roamdPath() string {
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), "roamd")
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("roamd"); err == nil {
		return p
	}
	return ""
}
