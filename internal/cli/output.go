package cli

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
)

// The one way a command prints its result: text for a person, or, with
// the global --json, JSON for a script. A command says which JSON it
// prints by an annotation (jsonVia): one value (an object or an array,
// indented), or a stream, one object a line (NDJSON), which a script
// reads line by line while it comes (roam events -f, roam logs -f, roam
// run). A command without one refuses --json, saying why (noJSON), and
// does nothing. Errors stay one line on standard error, and the exit
// status is the same with or without --json.

// jsonForm is the annotation naming a command's JSON.
const jsonForm = "roam-json"

// The forms of jsonForm.
const (
	jsonValue  = "value"  // one JSON value
	jsonStream = "stream" // NDJSON: one object a line
)

// jsonVia marks c as printing form with --json.
func jsonVia(form string, c *cobra.Command) *cobra.Command {
	if c.Annotations == nil {
		c.Annotations = map[string]string{}
	}
	c.Annotations[jsonForm] = form
	return c
}

// noJSON says, by command path, why a command has no --json.
var noJSON = map[string]string{
	"roam top":          "it is a terminal view; roam nodes --json, roam ps --json and roam events -f --json give its data",
	"roam cluster exec": "its output is the command's own",
	"roam completion":   "it prints a shell script",
	"roam help":         "it prints help",
	"roam gendocs":      "it writes files",
}

// checkJSON refuses --json for a command that has none.
func (e *env) checkJSON(cmd *cobra.Command) error {
	if !e.json || cmd.Annotations[jsonForm] != "" {
		return nil
	}
	for c := cmd; c != nil; c = c.Parent() {
		if why, ok := noJSON[c.CommandPath()]; ok {
			return fmt.Errorf("%s: --json: no JSON form: %s", cmd.CommandPath(), why)
		}
	}
	return fmt.Errorf("%s: --json: no JSON form", cmd.CommandPath())
}

// result prints v as JSON with --json, else calls text.
func (e *env) result(v any, text func() error) error {
	if e.json {
		return e.printJSON(v)
	}
	return text()
}

// printJSON prints v as one indented JSON value.
func (e *env) printJSON(v any) error {
	enc := json.NewEncoder(e.out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// record prints v as one line of JSON: a stream's record (NDJSON).
// Goroutines that print at once hold e.outMu around it (follow).
func (e *env) record(v any) error {
	return json.NewEncoder(e.out).Encode(v)
}

// jobRecord is one line of a job's stream with --json (roam run, attach,
// restart, logs).
type jobRecord struct {
	Job string `json:"job"`
	// Kind: started (Node), stdout or stderr (a line of output),
	// restarted (from the checkpoint of At on Node), lost (with Node, at
	// At), cut (its output lacks what Why says), exit (ExitCode); summary
	// (a sweep's, without Job).
	Kind string `json:"kind"`
	Node string `json:"node,omitempty"`
	// Text is a line of output without its newline, when it is UTF-8;
	// else Bytes holds it (base64). Partial: the output ended without a
	// newline (so far).
	Text     *string   `json:"text,omitempty"`
	Bytes    []byte    `json:"bytes,omitempty"`
	Partial  bool      `json:"partial,omitempty"`
	ExitCode *int      `json:"exit_code,omitempty"`
	At       time.Time `json:"at,omitzero"`
	Why      string    `json:"why,omitempty"`
	// Sweep is the run's sweep (started, summary); Summary how its
	// indices ended.
	Sweep   string `json:"sweep,omitempty"`
	Summary string `json:"summary,omitempty"`
}

// lineRecord is a line of a job's output as a record.
func lineRecord(id, stream string, line []byte, partial bool) jobRecord {
	r := jobRecord{Job: id, Kind: stream, Partial: partial}
	if utf8.Valid(line) {
		s := string(line)
		r.Text = &s
	} else {
		r.Bytes = line
	}
	return r
}

// jsonCommands are the commands of root with a JSON form, by path, and
// the form: what the end-to-end test of --json must run.
func jsonCommands(root *cobra.Command) map[string]string {
	out := map[string]string{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if f := c.Annotations[jsonForm]; f != "" {
			out[c.CommandPath()] = f
		}
		for _, s := range c.Commands() {
			walk(s)
		}
	}
	walk(root)
	return out
}

// JSONCommands names every roam command with a JSON form and the form
// ("value" or "stream"), sorted by path: what `roam --json` prints
// besides, for the end-to-end test that runs each.
func JSONCommands() []string {
	m := jsonCommands((&env{}).rootCmd())
	var out []string
	for p, f := range m {
		out = append(out, p+"\t"+f)
	}
	sort.Strings(out)
	return out
}

// shown is s as a terminal may show it: what users put in a job (its
// command line, names of its files, the reasons it ended with) reaches
// other people's terminals through roam ps and roam events, where an
// escape sequence could retitle a window, clear a screen or fake a line.
// Control characters (C0, DEL, C1) and invalid UTF-8 are written as Go
// escapes (\x1b, \u009b); text that has none is returned as it is.
func shown(s string) string {
	clean := true
	for _, r := range s {
		if r == utf8.RuneError || unicode.IsControl(r) {
			clean = false
			break
		}
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n <= 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r < 0x80 && unicode.IsControl(r):
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}
