package load

import (
	"os/exec"
	"strings"
	"testing"
)

// The pure core must not reach the network, processes, disk stores or CRIU:
// that is what lets the simulator drive it with a virtual clock and the tests
// run in milliseconds (tailscale-style dependency test).
func TestLoadImportsNoIO(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "roam/internal/load").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	forbidden := []string{"net", "os/exec", "go.etcd.io/bbolt", "github.com/checkpoint-restore/go-criu", "github.com/hashicorp/memberlist"}
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if dep == f || strings.HasPrefix(dep, f+"/") {
				t.Errorf("internal/load depends on %s", dep)
			}
		}
	}
	direct, err := exec.Command("go", "list", "-f", "{{join .Imports \" \"}}", "roam/internal/load").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, imp := range strings.Fields(string(direct)) {
		if imp == "os" || imp == "syscall" {
			t.Errorf("internal/load imports %s", imp)
		}
	}
}
