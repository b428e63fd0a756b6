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
// an argument is replaced by the line, and every {N} by its N-th field,
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
	for len(s) > 0 {
		n, width := ref(s)
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

// ref reads a reference at the start of s: {} (n 0) or {N} (n N), and its
// width; width 0: none.
func ref(s string) (n, width int) {
	if !strings.HasPrefix(s, "{") {
		return 0, 0
	}
	end := strings.IndexByte(s, '}')
	if end < 0 {
		return 0, 0
	}
	if end == 1 {
		return 0, 2
	}
	digits := s[1:end]
	if digits[0] == '0' || len(digits) > len(strconv.Itoa(MaxField)) {
		return 0, 0
	}
	v, err := strconv.Atoi(digits)
	if err != nil || v > MaxField {
		return 0, 0
	}
	return v, end + 1
}

// maxField is the highest {N} in args ({{}} aside), 0 for none.
func maxField(args ...string) int {
	most := 0
	for _, a := range args {
		for _, p := range strings.Split(a, "{{}}") {
			for i := range len(p) {
				if n, w := ref(p[i:]); w > 0 {
					most = max(most, n)
				}
			}
		}
	}
	return most
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

// HasRef says whether s holds {} or a {N}: a value given per index.
func HasRef(s string) bool {
	_, used := subst(s, "", nil)
	return used
}
