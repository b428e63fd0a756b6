// Package yamlerr turns the YAML decoder's errors, which name Go types and
// lines, into one line naming the key at fault by its dotted name and the
// form its value takes, for a file an admin wrote. It does no I/O.
package yamlerr

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// The YAML decoder's errors, which name Go types and lines, not keys.
var (
	typeErr  = regexp.MustCompile("^line ([0-9]+): cannot unmarshal !!([a-z]+)(?: `(.*)`)? into (.+)$")
	fieldErr = regexp.MustCompile(`^line ([0-9]+): field (.+) not found in type`)
)

// Message is one line for a decoding error of the YAML text b: the key
// at fault, by its dotted name, its line, and the form it takes (forms:
// by the Go type the decoder names; the type itself when missing).
func Message(b []byte, err error, forms map[string]string) string {
	var te *yaml.TypeError
	if !errors.As(err, &te) || len(te.Errors) == 0 {
		return regexp.MustCompile(`\s*\n\s*`).ReplaceAllString(err.Error(), "; ")
	}
	msg := te.Errors[0]
	if m := typeErr.FindStringSubmatch(msg); m != nil {
		form := forms[m[4]]
		if form == "" {
			form = m[4]
		}
		what := map[string]string{"seq": "a list", "map": "a section"}[m[2]]
		if what == "" {
			what = strconv.Quote(m[3])
		}
		msg = fmt.Sprintf("%s (line %s): %s is not %s", keyAt(b, m[1]), m[1], what, form)
	} else if m := fieldErr.FindStringSubmatch(msg); m != nil {
		msg = fmt.Sprintf("%s (line %s): not a known key", keyAt(b, m[1]), m[1])
	}
	if n := len(te.Errors) - 1; n > 0 {
		msg += fmt.Sprintf(" (and %d more)", n)
	}
	return msg
}

// keyAt is the dotted name of the deepest key on line of the YAML text b
// (or of the list holding an item there), or "line" when none is.
func keyAt(b []byte, line string) string {
	var root yaml.Node
	if yaml.Unmarshal(b, &root) != nil {
		return "line"
	}
	var find func(n *yaml.Node, prefix string) string
	find = func(n *yaml.Node, prefix string) string {
		ln := strconv.Itoa(n.Line)
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				if k := find(c, prefix); k != "" {
					return k
				}
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				name := prefix + n.Content[i].Value
				if k := find(n.Content[i+1], name+"."); k != "" {
					return k
				}
				if strconv.Itoa(n.Content[i].Line) == line {
					return name
				}
			}
		case yaml.SequenceNode:
			for _, c := range n.Content {
				if strconv.Itoa(c.Line) == line {
					return strings.TrimSuffix(prefix, ".")
				}
			}
		default:
			if ln == line && prefix != "" {
				return strings.TrimSuffix(prefix, ".")
			}
		}
		return ""
	}
	if k := find(&root, ""); k != "" {
		return k
	}
	return "line"
}
