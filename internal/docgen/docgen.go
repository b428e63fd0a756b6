// Package docgen writes a command's man pages and shell completions from
// its cobra command tree, so the installed documentation is always the
// command line that was built. `make install` and `make deb` call it
// through each binary's hidden "gendocs" command.
package docgen

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"roam/internal/api"
)

// Command is the hidden "gendocs DIR" command of root: it writes
// DIR/man/man<section>/*.<section> and DIR/completions/{bash,zsh,fish}.
func Command(root *cobra.Command, section string) *cobra.Command {
	return &cobra.Command{
		Use:    "gendocs DIR",
		Short:  "write man pages and shell completions under DIR",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			return Write(root, section, args[0])
		},
	}
}

// Write writes root's man pages (one per command) and its completions.
func Write(root *cobra.Command, section, dir string) error {
	man := filepath.Join(dir, "man", "man"+section)
	comp := filepath.Join(dir, "completions")
	for _, d := range []string{man, filepath.Join(comp, "bash"), filepath.Join(comp, "zsh"), filepath.Join(comp, "fish")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	root.DisableAutoGenTag = true
	hdr := &doc.GenManHeader{Section: section, Source: "roam " + api.Version, Manual: "roam manual"}
	if err := doc.GenManTree(root, hdr, man); err != nil {
		return fmt.Errorf("man pages: %w", err)
	}
	name := root.Name()
	if err := root.GenBashCompletionFileV2(filepath.Join(comp, "bash", name), true); err != nil {
		return err
	}
	if err := root.GenZshCompletionFile(filepath.Join(comp, "zsh", "_"+name)); err != nil {
		return err
	}
	return root.GenFishCompletionFile(filepath.Join(comp, "fish", name+".fish"), true)
}
