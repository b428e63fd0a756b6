package sweep

import (
	"fmt"
	"path"
	"strconv"
	"strings"
)

// --output and --error patterns: a path, relative to the run's working
// directory unless absolute, with Slurm's %A (the sweep id), %a (the
// index) and %j (the job id), and %% for a %. Any other % is refused,
// rather than kept as text, so that a pattern of Slurm's that roam does
// not know (%x, %N) is not written to a file of that literal name.

// MaxPattern bounds a pattern's length.
const MaxPattern = 4096

// Pattern values of one job.
type Values struct {
	Sweep, Job string
	Index      int
}

// CheckPattern checks pattern for flag (--output, --error): its % items,
// its size, and, when count jobs share it, that it names a file of each
// (%a or %j), for two jobs' output in one file would be each other's.
func CheckPattern(flag, pattern string, count int) error {
	switch {
	case pattern == "":
		return nil
	case len(pattern) > MaxPattern:
		return fmt.Errorf("%s: the pattern is %d bytes, more than %d", flag, len(pattern), MaxPattern)
	case strings.IndexByte(pattern, 0) >= 0:
		return fmt.Errorf("%s: the pattern holds a NUL byte", flag)
	}
	perJob := false
	for i := 0; i < len(pattern); i++ {
		if pattern[i] != '%' {
			continue
		}
		if i+1 == len(pattern) {
			return fmt.Errorf("%s: %q ends with a lone %%", flag, pattern)
		}
		switch pattern[i+1] {
		case 'a', 'j':
			perJob = true
		case 'A', '%':
		default:
			return fmt.Errorf("%s: %%%c in %q is not a pattern item (%%A sweep id, %%a index, %%j job id, %%%% a %%)", flag, pattern[i+1], pattern)
		}
		i++
	}
	if count > 1 && !perJob {
		return fmt.Errorf("%s: %q names one file for all %d jobs: put %%a (the index) or %%j (the job id) in it", flag, pattern, count)
	}
	if strings.HasSuffix(pattern, "/") {
		return fmt.Errorf("%s: %q names a directory, not a file", flag, pattern)
	}
	return nil
}

// Expand is pattern's path for one job, absolute: relative to cwd unless
// it is absolute itself. The pattern was checked (CheckPattern).
func Expand(pattern, cwd string, v Values) string {
	var b strings.Builder
	for i := 0; i < len(pattern); i++ {
		c := pattern[i]
		if c != '%' || i+1 == len(pattern) {
			b.WriteByte(c)
			continue
		}
		i++
		switch pattern[i] {
		case 'A':
			b.WriteString(v.Sweep)
		case 'a':
			b.WriteString(strconv.Itoa(v.Index))
		case 'j':
			b.WriteString(v.Job)
		default:
			b.WriteByte(pattern[i])
		}
	}
	p := b.String()
	if !path.IsAbs(p) {
		p = path.Join(cwd, p)
	}
	return path.Clean(p)
}
