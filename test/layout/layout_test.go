// Package layout holds tests of the repository's layout, not of any one
// package's behaviour.
package layout

import (
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// moduleRoot is the directory of go.mod, two levels up from this package.
func moduleRoot(t *testing.T) string {
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no module root at %s: %v", root, err)
	}
	return root
}

// TestPackageDocs fails for every package under cmd/ and internal/ without a
// package comment: "// Package NAME ..." for a library, "// Command NAME
// ..." or "// NAME is ..." for a main package (STYLE.md: a package comment
// in every package, saying what it is for and what it must not do).
func TestPackageDocs(t *testing.T) {
	root := moduleRoot(t)
	dirs := map[string][]string{} // directory -> its non-test .go files
	for _, top := range []string{"cmd", "internal"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			name := d.Name()
			if d.IsDir() {
				if name == "testdata" || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
					return filepath.SkipDir
				}
				return nil
			}
			if strings.HasSuffix(name, ".go") && !strings.HasSuffix(name, "_test.go") {
				dirs[filepath.Dir(path)] = append(dirs[filepath.Dir(path)], path)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(dirs) == 0 {
		t.Fatal("found no packages under cmd/ and internal/")
	}
	var missing []string
	for dir, files := range dirs {
		rel, _ := filepath.Rel(root, dir)
		doc, ok := packageDoc(t, dir, files)
		if !ok {
			missing = append(missing, rel)
			continue
		}
		// A package comment says what the package is now: one that
		// promises what comes "later" or holds a TODO has drifted.
		if w := driftWords.FindString(doc); w != "" {
			t.Errorf("%s: its package comment says %q: say what the package does now (plans go in issues)", rel, w)
		}
	}
	sort.Strings(missing)
	for _, m := range missing {
		t.Errorf("%s: no package comment", m)
	}
}

// driftWords mark a package comment that speaks of plans, not of the code.
var driftWords = regexp.MustCompile(`\b(later|TODO)\b`)

// packageDoc is the package comment, in the expected form, of one of a
// package's files, and whether there is one.
func packageDoc(t *testing.T, dir string, files []string) (string, bool) {
	fset := token.NewFileSet()
	for _, path := range files {
		f, err := parser.ParseFile(fset, path, nil, parser.PackageClauseOnly|parser.ParseComments)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if f.Doc == nil {
			continue
		}
		doc := f.Doc.Text()
		prefixes := []string{"Package " + f.Name.Name + " "}
		if f.Name.Name == "main" {
			cmd := filepath.Base(dir)
			prefixes = []string{"Command " + cmd + " ", cmd + " is "}
		}
		for _, p := range prefixes {
			if strings.HasPrefix(doc, p) {
				return doc, true
			}
		}
	}
	return "", false
}
