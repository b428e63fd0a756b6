package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The agent's paths are named in one place each: the user API's in
// internal/api/routes.go, the peer routes' in internal/agent/peer/routes.go.
// A string literal of such a path anywhere else in the program is a
// caller the route table and docs/openapi.yaml do not know of, and breaks
// silently when the path changes. (Tests may write raw requests.)
func TestAPIPathsAreNamedOnce(t *testing.T) {
	root := moduleRoot(t)
	owners := map[string]bool{
		filepath.Join("internal", "api", "routes.go"):           true,
		filepath.Join("internal", "agent", "peer", "routes.go"): true,
	}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "bin") {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || owners[rel] {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			_, p, _ := strings.Cut(s, " ") // "GET /path" as well as "/path"
			for _, v := range []string{s, p} {
				if strings.HasPrefix(v, "/v1/") || strings.HasPrefix(v, "/api/") {
					t.Errorf("%s: %q: name the path by its constant in internal/api/routes.go (user API) or internal/agent/peer/routes.go (peer routes)", fset.Position(lit.Pos()), s)
					return true
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
