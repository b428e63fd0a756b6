//go:build node

package cli

import "github.com/spf13/cobra"

// toolCmds: none in the node package (see tools.go).
func (e *env) toolCmds() []*cobra.Command { return nil }
