//go:build !node

package cli

import "github.com/spf13/cobra"

// toolCmds are the developer's commands: the emulated cluster and the
// benchmarks and the simulator. The node package (built with the tag node) leaves them out,
// and with them gonum/plot: a cluster's users need neither on their PATH.
func (e *env) toolCmds() []*cobra.Command {
	return []*cobra.Command{e.clusterCmd(), e.benchCmd(), e.simCmd()}
}
