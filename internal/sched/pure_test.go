package sched

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The pure core must not reach the network, processes, disk stores or CRIU,
// nor keep a clock, goroutines or locks of its own: that is what lets the
// agent, the simulator and these tests drive it with time passed in
// (tailscale-style dependency test).
func TestSchedImportsNoIO(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "roam/internal/sched").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	forbidden := []string{"net", "os/exec", "go.etcd.io/bbolt", "github.com/checkpoint-restore/go-criu", "github.com/hashicorp/memberlist"}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("internal/sched depends on %s", dep)
			}
		}
	}
	direct, err := exec.Command("go", "list", "-f", "{{join .Imports \" \"}}", "roam/internal/sched").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, imp := range strings.Fields(string(direct)) {
		if imp == "os" || imp == "syscall" || imp == "sync" {
			t.Errorf("internal/sched imports %s", imp)
		}
	}
}

// clockFuncs read or wait on the wall clock; the time a decision needs is
// an argument.
var clockFuncs = map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true,
	"After": true, "AfterFunc": true, "Tick": true, "NewTimer": true, "NewTicker": true}

func TestSchedReadsNoClock(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		timeName := ""
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == "time" {
				timeName = "time"
				if imp.Name != nil {
					timeName = imp.Name.Name
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if id, ok := n.X.(*ast.Ident); ok && timeName != "" && id.Name == timeName && clockFuncs[n.Sel.Name] {
					t.Errorf("%s: time.%s: pass the time in", fset.Position(n.Pos()), n.Sel.Name)
				}
			case *ast.GoStmt:
				t.Errorf("%s: a goroutine in the pure core", fset.Position(n.Pos()))
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no source files checked")
	}
}
