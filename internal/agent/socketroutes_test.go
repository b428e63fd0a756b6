package agent

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// socketRoutesCovered are the routes observe.Server.SocketRoutes may put
// on the roam socket (roamd passes it as Parts.Routes): the ones
// TestSocketRoutesGetTheSocketsCaller covers, by their names in package
// observe.
var socketRoutesCovered = []string{"TokenRoute"}

// A route roamd adds to the socket through Parts.Routes escapes
// TestAuthzMatrixCoversEveryRoute, which reads apiRoutes. This test reads
// observe.Server.SocketRoutes instead: every route it registers must be
// one TestSocketRoutesGetTheSocketsCaller covers, and it may do nothing
// else with its mux (a route registered elsewhere would escape this
// test too).
func TestSocketRoutesAreCovered(t *testing.T) {
	fset := token.NewFileSet()
	files, err := filepath.Glob(filepath.Join("observe", "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var fd *ast.FuncDecl
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatalf("parse %s: %v", f, err)
		}
		for _, d := range af.Decls {
			if d, ok := d.(*ast.FuncDecl); ok && d.Name.Name == "SocketRoutes" && d.Recv != nil {
				fd = d
			}
		}
	}
	if fd == nil || len(fd.Type.Params.List) == 0 || len(fd.Type.Params.List[0].Names) != 1 {
		t.Fatal("package observe has no method SocketRoutes taking its mux first")
	}
	mux := fd.Type.Params.List[0].Names[0].Name
	var routes []string
	uses, registers := 0, 0
	ast.Inspect(fd.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Ident:
			if n.Name == mux {
				uses++
			}
		case *ast.CallExpr:
			sel, ok := n.Fun.(*ast.SelectorExpr)
			if !ok {
				break
			}
			if id, ok := sel.X.(*ast.Ident); !ok || id.Name != mux || (sel.Sel.Name != "Handle" && sel.Sel.Name != "HandleFunc") {
				break
			}
			registers++
			id, ok := n.Args[0].(*ast.Ident)
			if !ok {
				t.Errorf("%s: SocketRoutes registers a route whose pattern is not a constant of package observe", fset.Position(n.Pos()))
				break
			}
			routes = append(routes, id.Name)
		}
		return true
	})
	if uses != registers {
		t.Errorf("%s: SocketRoutes uses its mux %d times, %d of them to register a route: a route registered another way escapes this test", fset.Position(fd.Pos()), uses, registers)
	}
	for _, r := range routes {
		if !slices.Contains(socketRoutesCovered, r) {
			t.Errorf("SocketRoutes registers observe.%s, which no test of who may use it covers: add it to TestSocketRoutesGetTheSocketsCaller and to socketRoutesCovered", r)
		}
	}
	if len(routes) == 0 {
		t.Error("SocketRoutes registers no route: the token route is gone, or this test no longer reads it")
	}
}
