// Package docgen writes a command's man pages and shell completions from
// its cobra command tree, so the installed documentation is always the
// command line that was built, and keeps the sections a command's help
// and man page share (exit statuses, environment). `make install` and `make deb` call it
// through each binary's hidden "gendocs" command.
package docgen

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

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
	if err := addSections(root, section, man); err != nil {
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

// A command's help and man page may have sections of their own besides
// cobra's (EXIT STATUS, ENVIRONMENT): AddSection keeps one in the
// command's annotations; Help prints them after the long description, and
// Write puts them in the man page, before OPTIONS, as tagged paragraphs.
// One table, so --help and the man page cannot say different things.
const sectionKey = "man-section "

// Section is a section of a command's help and man page: rows of a term
// (an exit status, a variable) and what it means.
type Section struct {
	Title string
	Rows  [][2]string
}

// AddSection gives c the section title (in upper case, as man pages
// have them) with rows, after those added before.
func AddSection(c *cobra.Command, title string, rows [][2]string) {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%s\t%s\n", r[0], r[1])
	}
	c.Annotations[fmt.Sprintf("%s%02d %s", sectionKey, len(Sections(c)), title)] = b.String()
}

// Sections are c's own sections, in the order they were added.
func Sections(c *cobra.Command) []Section {
	var keys []string
	for k := range c.Annotations {
		if strings.HasPrefix(k, sectionKey) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []Section
	for _, k := range keys {
		s := Section{Title: strings.SplitN(k, " ", 3)[2]}
		for _, line := range strings.Split(strings.TrimSuffix(c.Annotations[k], "\n"), "\n") {
			term, def, _ := strings.Cut(line, "\t")
			s.Rows = append(s.Rows, [2]string{term, def})
		}
		out = append(out, s)
	}
	return out
}

// Help is c's sections as --help prints them: each title, then its rows,
// the terms in a column and their meanings wrapped beside them.
func Help(c *cobra.Command) string {
	var b strings.Builder
	for _, s := range Sections(c) {
		width := 0
		for _, r := range s.Rows {
			width = max(width, len(r[0]))
		}
		fmt.Fprintf(&b, "%s\n", s.Title)
		for _, r := range s.Rows {
			lines := wrap(r[1], 76-4-width)
			for i, l := range lines {
				term := ""
				if i == 0 {
					term = r[0]
				}
				fmt.Fprintf(&b, "  %-*s  %s\n", width, term, l)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

// wrap breaks text into lines of at most width bytes.
func wrap(text string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return append(lines, line)
}

// roff is c's sections as man page sections of tagged paragraphs.
func roff(c *cobra.Command) string {
	esc := strings.NewReplacer(`\`, `\e`, "-", `\-`)
	var b strings.Builder
	for _, s := range Sections(c) {
		fmt.Fprintf(&b, ".SH %s\n", s.Title)
		for _, r := range s.Rows {
			text := esc.Replace(r[1])
			if strings.HasPrefix(text, ".") || strings.HasPrefix(text, "'") {
				text = `\&` + text
			}
			fmt.Fprintf(&b, ".TP\n.B %s\n%s\n", esc.Replace(r[0]), text)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// addSections puts every command's own sections into its man page, which
// GenManTree wrote, before its OPTIONS.
func addSections(root *cobra.Command, section, dir string) error {
	var err error
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			walk(sub)
		}
		extra := roff(c)
		if extra == "" || err != nil {
			return
		}
		file := filepath.Join(dir, strings.ReplaceAll(c.CommandPath(), " ", "-")+"."+section)
		b, rerr := os.ReadFile(file)
		if rerr != nil {
			err = rerr
			return
		}
		page := string(b)
		at := strings.Index(page, "\n.SH OPTIONS")
		if at < 0 {
			at = strings.Index(page, "\n.SH SEE ALSO")
		}
		if at < 0 {
			err = fmt.Errorf("%s: no OPTIONS or SEE ALSO section to put %s's own sections before", file, c.CommandPath())
			return
		}
		page = page[:at+1] + extra + page[at+1:]
		err = os.WriteFile(file, []byte(page), 0o644)
	}
	walk(root)
	return err
}
