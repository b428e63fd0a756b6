package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// purePkg is a package of the pure core.
type purePkg struct {
	pkg string
	// netip: net/netip (address parsing, no I/O) is allowed.
	netip bool
}

// The pure core must not reach the network, processes, disk stores or
// CRIU, nor keep a clock, goroutines or locks of its own: that is what lets
// the agent, the simulator and the tests drive it with time passed in
// (tailscale-style dependency test).
var pure = []purePkg{
	{"internal/load", false},
	{"internal/sched", false},
	{"internal/migrate", true},
	{"internal/resources", false},
	{"internal/slurm", false},
	{"internal/carry", false},
	// The simulator drives the core on a model: pure as well, so that a
	// seed gives the same run.
	{"internal/sim", false},
	// What the core imports of roam's own must be pure as well.
	{"internal/proctext", false},
	{"internal/errkind", false},
	{"internal/sweep", false},
	{"internal/queue", false},
	{"internal/fence", false},
	{"internal/cpufeat", false},
	{"internal/paired", false},
}

// forbiddenDeps may not be among a pure package's dependencies, nor
// anything below them.
var forbiddenDeps = []string{"net", "os/exec", "go.etcd.io/bbolt", "github.com/checkpoint-restore/go-criu", "github.com/hashicorp/memberlist"}

// forbiddenImports may not be imported by a pure package directly.
var forbiddenImports = map[string]bool{"os": true, "os/exec": true, "net": true, "syscall": true, "golang.org/x/sys/unix": true, "sync": true}

// clockFuncs read or wait on the wall clock; the time a decision needs is
// an argument.
var clockFuncs = map[string]bool{"Now": true, "Since": true, "Until": true, "Sleep": true,
	"After": true, "AfterFunc": true, "Tick": true, "NewTimer": true, "NewTicker": true}

func TestPureCoreDoesNoIO(t *testing.T) {
	for _, p := range pure {
		out, err := exec.Command("go", "list", "-deps", "roam/"+p.pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", p.pkg, err)
		}
		for _, dep := range strings.Fields(string(out)) {
			if p.netip && dep == "net/netip" {
				continue
			}
			// Followed transitively: roam's own packages it reaches are
			// pure ones, themselves held to these rules.
			if rel, ok := strings.CutPrefix(dep, "roam/"); ok && !slices.ContainsFunc(pure, func(q purePkg) bool { return q.pkg == rel }) {
				t.Errorf("%s imports %s, which is not a pure package: split what it needs into one (as proctext parses what procfs reads) and list it in pure", p.pkg, rel)
			}
			for _, f := range forbiddenDeps {
				if dep == f || strings.HasPrefix(dep, f+"/") {
					t.Errorf("%s depends on %s", p.pkg, dep)
				}
			}
		}
		direct, err := exec.Command("go", "list", "-f", `{{join .Imports " "}}`, "roam/"+p.pkg).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", p.pkg, err)
		}
		for _, imp := range strings.Fields(string(direct)) {
			if forbiddenImports[imp] {
				t.Errorf("%s imports %s", p.pkg, imp)
			}
		}
	}
}

func TestPureCoreReadsNoClock(t *testing.T) {
	root := moduleRoot(t)
	for _, p := range pure {
		files, err := filepath.Glob(filepath.Join(root, p.pkg, "*.go"))
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
				if path, _ := strconv.Unquote(imp.Path.Value); path == "time" {
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
			t.Fatalf("%s: no source files checked", p.pkg)
		}
	}
}

// The agent's owners live in sub-packages of internal/agent, which the
// agent wires together: none of them may import the agent (or one
// another's way back to it), or the owners would reach into its state
// again.
func TestAgentSubpackagesDoNotImportTheAgent(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "roam/internal/agent/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	subs := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fs := strings.Fields(line)
		if len(fs) == 0 || fs[0] == "roam/internal/agent" {
			continue
		}
		subs++
		if slices.Contains(fs[1:], "roam/internal/agent") {
			t.Errorf("%s depends on roam/internal/agent: pass what it needs in (a func, an interface) from the agent's wiring instead", fs[0])
		}
	}
	if subs == 0 {
		t.Fatal("no sub-package of internal/agent found")
	}
}
