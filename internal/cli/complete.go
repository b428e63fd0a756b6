package cli

import (
	"context"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"

	"roam/internal/api"
	"roam/internal/emu"
	"roam/internal/sched"
)

// Completion of job ids, node ids, policy names and signal names (cobra's
// ValidArgsFunction and flag completions). Ids are asked of the agent,
// briefly: with no agent, or a slow one, completion offers nothing and
// prints nothing, rather than file names where ids belong.

// completeWithin bounds a completion's question to the agent: the shell
// waits for it.
const completeWithin = 2 * time.Second

// never offers nothing, and no file names.
const never = cobra.ShellCompDirectiveNoFileComp

// askAgent gets path from the agent into out; false when there is none
// or it does not answer in time.
func (e *env) askAgent(path string, out any) bool {
	cl, err := e.client()
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), completeWithin)
	defer cancel()
	return cl.Do(ctx, http.MethodGet, path, nil, out) == nil
}

// completeJobs offers the ids of the caller's jobs (all of them for
// root) in the states given (any, when none), but those already typed.
func (e *env) completeJobs(states ...string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		var js []api.Job
		if !e.askAgent(api.PathPS+"?all=1", &js) {
			return nil, never
		}
		var out []string
		for _, j := range js {
			if (len(states) == 0 || slices.Contains(states, j.State)) && !slices.Contains(args, j.ID) && strings.HasPrefix(j.ID, toComplete) {
				out = append(out, j.ID+"\t"+shown(j.State+" on node "+j.Node+": "+j.Cmd))
			}
		}
		return out, never
	}
}

// liveJobs are the states of a job a signal, a migration or a checkpoint
// can reach.
var liveJobs = []string{api.StateRunning, api.StateStopped}

// nodeIDs are the ids of the nodes the agent knows alive; nil when no
// agent answers.
func (e *env) nodeIDs() []string {
	var ns []api.NodeInfo
	if !e.askAgent(api.PathNodes, &ns) {
		return nil
	}
	var out []string
	for _, n := range ns {
		if n.Alive {
			out = append(out, n.ID)
		}
	}
	sort.Strings(out)
	return out
}

// completeNodes offers node ids (and extra words, such as home and auto)
// for the argument at index pos; nothing when no agent answers.
func (e *env) completeNodes(pos int, extra ...string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		ids := e.nodeIDs()
		if len(args) != pos || ids == nil {
			return nil, never
		}
		return prefixed(append(ids, extra...), toComplete), never
	}
}

// completeNodeFlag offers node ids for a flag.
func (e *env) completeNodeFlag(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return prefixed(e.nodeIDs(), toComplete), never
}

// completeEmuNodes offers the nodes of the emulated cluster (no agent
// asked: its state file says them).
func (e *env) completeEmuNodes(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) != 0 {
		return nil, never
	}
	st, err := emu.Load(e.cluster)
	if err != nil {
		return nil, never
	}
	var ids []string
	for _, n := range st.Nodes {
		ids = append(ids, n.ID)
	}
	return prefixed(ids, toComplete), never
}

// completePolicy offers the built-in policies' names, and files.
func completePolicy(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	if len(args) != 0 {
		return nil, never
	}
	var names []string
	for n := range sched.Builtin {
		names = append(names, n)
	}
	sort.Strings(names)
	return prefixed(names, toComplete), cobra.ShellCompDirectiveDefault
}

// signalNames are the names parseSignal takes, as kill -l prints them.
func signalNames() []string {
	var out []string
	for n := 1; n < sigRTMin; n++ {
		if name := unix.SignalName(unix.Signal(n)); name != "" {
			out = append(out, strings.TrimPrefix(name, "SIG"))
		}
	}
	out = append(out, "RTMIN")
	for n := 1; sigRTMin+n < sigRTMax; n++ {
		out = append(out, "RTMIN+"+strconv.Itoa(n))
	}
	return append(out, "RTMAX")
}

// completeSignal offers signal names for kill -s.
func completeSignal(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	return prefixed(signalNames(), strings.ToUpper(toComplete)), never
}

// prefixed are the words that start with prefix.
func prefixed(words []string, prefix string) []string {
	var out []string
	for _, w := range words {
		if strings.HasPrefix(w, prefix) {
			out = append(out, w)
		}
	}
	return out
}
