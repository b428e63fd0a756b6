package layout

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// readmeMaxLines bounds README.md: it is the front door (what roam is, the
// two set-up commands, one demo, the feature table, a map of the docs),
// not a lab notebook (STYLE.md, "Docs").
const readmeMaxLines = 200

// diary matches the phrases of a dated history of work: an ordinal
// session ("the twelfth session", "13th session"), "this session", "the
// last run", and ISO dates. Measured facts say what was measured and how
// ("on 4 emulated nodes of 0.2 CPU", "commit 6157262"), not when.
var diary = regexp.MustCompile(`(?i)\b(?:(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth|thirteenth|fourteenth|fifteenth|sixteenth|seventeenth|eighteenth|nineteenth|twentieth|\d+(?:st|nd|rd|th))\s+session|this\s+session|last\s+run)\b|\b20\d\d-\d\d-\d\d\b`)

// diaryAllowed lists, per file (relative to the module root), text that
// matches diary but is not history: a line holding one of these strings
// passes. Each entry needs a comment saying why the doc must keep it (say,
// the release date of a CRIU version a rule depends on). Empty today.
var diaryAllowed = map[string][]string{}

// TestDocsKeepNoDiary fails when README.md grows past readmeMaxLines, or
// when README.md or a doc in docs/ (docs/results/ holds raw reports and is
// not checked) narrates dated history of work.
func TestDocsKeepNoDiary(t *testing.T) {
	root := moduleRoot(t)
	const fix = "move results to docs/benchmarks.md (raw reports to docs/results/) and test descriptions to docs/testing.md; history belongs in commit messages"

	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if n := lineCount(string(readme)); n > readmeMaxLines {
		t.Errorf("README.md has %d lines, at most %d: it is the front door (what roam is, the two set-up commands, one demo, the feature table, a map of the docs); %s", n, readmeMaxLines, fix)
	}

	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("found no docs/*.md")
	}
	used := map[string]bool{}
	for _, path := range append([]string{filepath.Join(root, "README.md")}, docs...) {
		rel, _ := filepath.Rel(root, path)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(b), "\n") {
			m := diary.FindString(line)
			if m == "" {
				continue
			}
			if a := allowedIn(rel, line); a != "" {
				used[rel+"\x00"+a] = true
				continue
			}
			t.Errorf("%s:%d: %q reads as a dated diary: %s", rel, i+1, m, fix)
		}
	}
	// An entry that no longer matches anything has outlived its reason.
	for file, entries := range diaryAllowed {
		for _, a := range entries {
			if !used[file+"\x00"+a] {
				t.Errorf("diaryAllowed: %s no longer holds %q: remove the entry", file, a)
			}
		}
	}
}

// allowedIn is the entry of diaryAllowed that line of file holds, if any.
func allowedIn(file, line string) string {
	for _, a := range diaryAllowed[file] {
		if strings.Contains(line, a) {
			return a
		}
	}
	return ""
}

// lineCount counts lines as an editor shows them: a last line without a
// newline counts too.
func lineCount(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}
