package layout

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// The agent's shape (issue 41, STYLE.md): the package internal/agent
// itself at most agentLines of code, a sub-package at most subLines, no
// file over fileLines, no function over funcLines (the machines' action
// switches aside), *Agent at most agentMethods methods. Each excess
// fails, naming what grew: a concern that outgrows its package is split
// by what it owns, not given a larger limit.
const (
	agentLines   = 1000
	subLines     = 2000
	fileLines    = 500
	funcLines    = 60
	agentMethods = 20
)

// actionSwitches are the machines' drivers' switches over their actions:
// one case an action, as long as the machine has actions.
var actionSwitches = map[string]bool{"(*outMig).do": true, "(*outMig).ckDo": true, "(*Driver).doIn": true}

func TestAgentShape(t *testing.T) {
	root := moduleRoot(t)
	sizes := map[string]int{} // what exceeds a limit
	limits := map[string]int{}
	pkgLines := map[string]int{} // package dir -> lines
	methods := 0
	fset := token.NewFileSet()
	err := filepath.WalkDir(filepath.Join(root, "internal", "agent"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		lines := strings.Count(string(b), "\n")
		pkgLines[filepath.Dir(rel)] += lines
		if lines > fileLines {
			sizes["file "+rel], limits["file "+rel] = lines, fileLines
		}
		f, err := parser.ParseFile(fset, path, b, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			name := fd.Name.Name
			if fd.Recv != nil {
				recv := fd.Recv.List[0].Type
				star := ""
				if s, ok := recv.(*ast.StarExpr); ok {
					recv, star = s.X, "*"
				}
				if id, ok := recv.(*ast.Ident); ok {
					name = "(" + star + id.Name + ")." + name
					if star == "*" && id.Name == "Agent" && filepath.Dir(rel) == filepath.Join("internal", "agent") {
						methods++
					}
				}
			}
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			if n > funcLines && !actionSwitches[name] {
				key := "func " + rel + " " + name
				sizes[key], limits[key] = n, funcLines
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for dir, n := range pkgLines {
		limit := subLines
		if dir == filepath.Join("internal", "agent") {
			limit = agentLines
		}
		if n > limit {
			sizes["package "+dir], limits["package "+dir] = n, limit
		}
	}
	if methods > agentMethods {
		sizes["methods of *Agent"], limits["methods of *Agent"] = methods, agentMethods
	}
	var keys []string
	for k := range sizes {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		t.Errorf("%s is %d, over the limit of %d: split it by what it owns (STYLE.md, docs/architecture.md)", k, sizes[k], limits[k])
	}
	t.Logf("internal/agent: %s", fmt.Sprint(pkgLines))
}
