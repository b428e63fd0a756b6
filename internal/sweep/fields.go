package sweep

// An --args-from line in a command: whole ({}), or field by field ({1},
// {2}, … as GNU parallel's --colsep names them; here the fields are the
// line's words, split at blanks), in the command and in roam run's --mem
// (each index its own request).

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// MaxField is the highest field a {N} names.
const MaxField = 999

// Subst is the command of an index with an --args-from line: every {} in
// an argument is replaced by the line, and every {N} by its N-th field
// (not ${N}, a shell's parameter), as text inside that one argument (no
// shell reads it, so no quoting is needed or done: spaces, quotes and $
// stay as they are); with neither anywhere, the line is appended as one
// more argument. {{}} is a literal {}. A field the line lacks is empty:
// CheckFields refuses such a run first.
func Subst(argv []string, line string) []string {
	fields := strings.Fields(line)
	out := make([]string, len(argv))
	found := false
	for i, a := range argv {
		var used bool
		out[i], used = fill(pieces(a), line, fields)
		found = found || used
	}
	if !found {
		out = append(out, line)
	}
	return out
}

// piece is a part of an argument: literal text, or a reference (ref) to
// the whole line (n 0) or to its n-th field.
type piece struct {
	lit string
	n   int
	ref bool
}

// pieces reads an argument into literal text and references, in one
// pass (a field holding "{}" is never read again): {{}} is a literal {},
// and ${N}, a shell's parameter, is literal too.
func pieces(a string) []piece {
	var out []piece
	var lit strings.Builder
	prev := byte(0)
	for len(a) > 0 {
		if strings.HasPrefix(a, "{{}}") {
			lit.WriteString("{}")
			prev, a = '}', a[len("{{}}"):]
			continue
		}
		n, w := ref(a)
		if w == 0 || n > 0 && prev == '$' {
			lit.WriteByte(a[0])
			prev, a = a[0], a[1:]
			continue
		}
		if lit.Len() > 0 {
			out = append(out, piece{lit: lit.String()})
			lit.Reset()
		}
		out = append(out, piece{n: n, ref: true})
		prev, a = '}', a[w:]
	}
	if lit.Len() > 0 {
		out = append(out, piece{lit: lit.String()})
	}
	return out
}

// fill is ps with its references replaced from line and its fields,
// and whether it had any.
func fill(ps []piece, line string, fields []string) (string, bool) {
	var b strings.Builder
	used := false
	for _, p := range ps {
		switch {
		case !p.ref:
			b.WriteString(p.lit)
		case p.n == 0:
			b.WriteString(line)
		case p.n <= len(fields):
			b.WriteString(fields[p.n-1])
		}
		used = used || p.ref
	}
	return b.String(), used
}

// ref reads a reference at the start of s: {} (n 0) or {N} (n N, 1 to
// MaxField, digits only, no leading 0), and its width; width 0: none. It
// looks no further than a reference can be long.
func ref(s string) (n, width int) {
	if len(s) < 2 || s[0] != '{' {
		return 0, 0
	}
	if s[1] == '}' {
		return 0, 2
	}
	i := 1
	for i < len(s) && i <= len(strconv.Itoa(MaxField)) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 1 || s[1] == '0' || i >= len(s) || s[i] != '}' {
		return 0, 0
	}
	v, _ := strconv.Atoi(s[1:i])
	return v, i + 1
}

// maxField is the highest {N} in args, 0 for none.
func maxField(args ...string) int {
	most := 0
	for _, a := range args {
		for _, p := range pieces(a) {
			most = max(most, p.n)
		}
	}
	return most
}

// Longest is the index of the line whose command (Subst of argv) is
// the longest, found without making the commands, which {N} repeated in
// argv could make far longer than their lines: the run's limits are
// held against that one. 0 when there are no lines.
func Longest(argv, lines []string) int {
	fixed, whole, byField, found := 0, 0, map[int]int{}, false
	for _, a := range argv {
		for _, p := range pieces(a) {
			switch {
			case !p.ref:
				fixed += len(p.lit)
			case p.n == 0:
				whole++
			default:
				byField[p.n]++
			}
			found = found || p.ref
		}
	}
	if !found {
		whole = 1 // the line is appended
	}
	best, most := 0, -1
	for i, l := range lines {
		n := fixed + whole*len(l)
		if len(byField) > 0 {
			fs := strings.Fields(l)
			for k, c := range byField {
				if k <= len(fs) {
					n += c * len(fs[k-1])
				}
			}
		}
		if n > most {
			best, most = i, n
		}
	}
	return best
}

// CheckFields refuses lines that lack a field the command names ({N});
// what names the lines (the flag and its file, or the request's field).
func CheckFields(what string, argv, lines []string) error {
	most := maxField(argv...)
	if most == 0 {
		return nil
	}
	for i, l := range lines {
		if n := len(strings.Fields(l)); n < most {
			return fmt.Errorf("%s: line %d has %d fields; the command's {%d} names field %d", what, i+1, n, most, most)
		}
	}
	return nil
}

// Field is s with every {N} replaced by the N-th field of line ({} by the
// whole line): roam run's --mem of one index. It fails on a field the
// line lacks.
func Field(s, line string) (string, error) {
	fields := strings.Fields(line)
	if n := maxField(s); n > len(fields) {
		return "", fmt.Errorf("{%d}: the line has %d fields", n, len(fields))
	}
	out, _ := fill(pieces(s), line, fields)
	return out, nil
}

// HasRef says whether s holds {} or a {N} ({{}} and ${N} aside): a
// value given per index.
func HasRef(s string) bool {
	return slices.ContainsFunc(pieces(s), func(p piece) bool { return p.ref })
}
