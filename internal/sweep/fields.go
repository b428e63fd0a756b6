package sweep

// An --args-from line in a command: whole ({}), or field by field ({1},
// {2}, … as GNU parallel's --colsep names them; here the fields are the
// line's words, split at blanks), in the command and in roam run's --mem
// (each index its own request).

import (
	"fmt"
	"strconv"
	"strings"
)

// MaxField is the highest field a {N} names.
const MaxField = 999

// Subst is the command of an index with an --args-from line: every {} in
// an argument is replaced by the line, and every {N} by its N-th field
// (not ${N}, a shell's parameter),
// as text inside that one argument (no shell reads it, so no quoting is
// needed or done: spaces, quotes and $ stay as they are); with neither
// anywhere, the line is appended as one more argument. {{}} is a literal
// {}. A field the line lacks is empty: CheckFields refuses such a run
// first.
func Subst(argv []string, line string) []string {
	fields := strings.Fields(line)
	out := make([]string, len(argv))
	found := false
	for i, a := range argv {
		parts := strings.Split(a, "{{}}")
		for k, p := range parts {
			var used bool
			parts[k], used = subst(p, line, fields)
			found = found || used
		}
		out[i] = strings.Join(parts, "{}")
	}
	if !found {
		out = append(out, line)
	}
	return out
}

// subst replaces {} and {N} in s, in one pass (a field holding "{}" stays
// as it is), and says whether there was any.
func subst(s, line string, fields []string) (string, bool) {
	var b strings.Builder
	used := false
	prev := byte(0)
	for len(s) > 0 {
		n, width := ref(s)
		if n > 0 && prev == '$' {
			width = 0 // ${N}: a shell's parameter, not a field
		}
		prev = s[0]
		switch {
		case width == 0:
			b.WriteByte(s[0])
			s = s[1:]
			continue
		case n == 0:
			b.WriteString(line)
		case n <= len(fields):
			b.WriteString(fields[n-1])
		}
		used = true
		s = s[width:]
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

// maxField is the highest {N} in args ({{}} and ${N} aside), 0 for
// none.
func maxField(args ...string) int {
	most := 0
	for _, a := range args {
		for _, p := range strings.Split(a, "{{}}") {
			for i := range len(p) {
				if n, w := ref(p[i:]); w > 0 && (i == 0 || p[i-1] != '$') {
					most = max(most, n)
				}
			}
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
		for k, p := range strings.Split(a, "{{}}") {
			if k > 0 {
				fixed += len("{}")
			}
			prev := byte(0)
			for len(p) > 0 {
				n, w := ref(p)
				if w == 0 || n > 0 && prev == '$' {
					fixed++
					prev, p = p[0], p[1:]
					continue
				}
				if n == 0 {
					whole++
				} else {
					byField[n]++
				}
				found = true
				prev, p = p[0], p[w:]
			}
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
	out, _ := subst(s, line, fields)
	return out, nil
}

// HasRef says whether s holds {} or a {N} ({{}} and ${N} aside): a
// value given per index.
func HasRef(s string) bool {
	for _, p := range strings.Split(s, "{{}}") {
		if _, used := subst(p, "", nil); used {
			return true
		}
	}
	return false
}
