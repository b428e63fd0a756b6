package migrate

import (
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The protocol must stay a pure step machine: no network, processes, disk,
// CRIU or wall clock, so that every fault point is a test that runs in
// microseconds and the harness drives it on a fake clock.
func TestMigrateIsPure(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "roam/internal/migrate").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	// net/netip (address parsing) is pure; net itself is not.
	forbidden := []string{"net", "net/http", "os/exec", "go.etcd.io/bbolt", "github.com/checkpoint-restore/go-criu", "github.com/hashicorp/memberlist"}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if dep == f || (f != "net" && strings.HasPrefix(dep, f+"/")) {
				t.Errorf("internal/migrate depends on %s", dep)
			}
		}
	}
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			switch p := strings.Trim(imp.Path.Value, `"`); p {
			case "os", "syscall", "net", "os/exec", "net/http":
				t.Errorf("%s imports %s", name, p)
			}
		}
		src, _ := exec.Command("grep", "-nE", `time\.(Now|Since|Until|Sleep|After|NewTimer|NewTicker|Tick)\(`, name).Output()
		if len(src) > 0 {
			t.Errorf("%s reads the wall clock or sleeps:\n%s", name, src)
		}
	}
}
