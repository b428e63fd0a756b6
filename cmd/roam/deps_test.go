package main

import (
	"os/exec"
	"strings"
	"testing"
)

// daemonOnly are the packages only roamd may link: the CLI reaches the agent
// through package api and nothing else (issue 12).
var daemonOnly = []string{
	"roam/internal/agent",
	"roam/internal/ckpt",
	"roam/internal/job",
	"go.etcd.io/bbolt",
	"github.com/checkpoint-restore/go-criu",
	"github.com/hashicorp/memberlist",
}

// TestNoDaemonCode fails when roam links daemon code, and shows the import
// path that brings each such package in.
func TestNoDaemonCode(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}", "roam/cmd/roam").Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			t.Fatalf("go list: %v\n%s", err, ee.Stderr)
		}
		t.Fatalf("go list: %v", err)
	}
	imports := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		imports[f[0]] = f[1:]
	}
	if len(imports) == 0 {
		t.Fatal("go list listed no packages")
	}
	for _, bad := range daemonOnly {
		if chain := importChain(imports, "roam/cmd/roam", bad); chain != nil {
			t.Errorf("roam links %s: %s", bad, strings.Join(chain, " -> "))
		}
	}
}

// importChain is a shortest import path from root to a package that is
// target or below it, or nil when there is none.
func importChain(imports map[string][]string, root, target string) []string {
	prev := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p == target || strings.HasPrefix(p, target+"/") {
			var chain []string
			for ; p != ""; p = prev[p] {
				chain = append([]string{p}, chain...)
			}
			return chain
		}
		for _, q := range imports[p] {
			if _, seen := prev[q]; !seen {
				prev[q] = p
				queue = append(queue, q)
			}
		}
	}
	return nil
}

// TestNodeBuildLeavesOutTheTools: roam built for a node (the tag node, as
// make release builds it) links neither the benchmarks nor gonum/plot.
func TestNodeBuildLeavesOutTheTools(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "-tags", "node", "roam/cmd/roam").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, p := range strings.Fields(string(out)) {
		if p == "roam/internal/bench" || strings.HasPrefix(p, "gonum.org/") {
			t.Errorf("the node build of roam links %s", p)
		}
	}
	all, err := exec.Command("go", "list", "-deps", "roam/cmd/roam").Output()
	if err != nil || !strings.Contains(string(all), "roam/internal/bench\n") {
		t.Fatalf("the source tree's roam does not link the benchmarks: %v", err)
	}
}
