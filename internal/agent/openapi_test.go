package agent

import (
	"os"
	"path/filepath"
	"roam/internal/agent/observe"
	"slices"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// docs/openapi.yaml describes the socket's routes, and only them: every
// route apiRoutes registers (read from its source, as the authorization
// matrix reads it, and checked against the mux it fills) is an operation
// of the file, and every operation of the file is a route apiRoutes
// registers. A wildcard {name...} is written {name} in OpenAPI.
func TestOpenAPIDescribesEveryRoute(t *testing.T) {
	served := map[string]bool{}
	for _, p := range authzRegistered(t, "apiRoutes") {
		served[strings.ReplaceAll(p, "...}", "}")] = true
	}
	// roamd adds the web view's token route through Parts.Routes
	// (cmd/roamd/wire.go).
	served[observe.TokenRoute] = true
	documented := map[string]bool{}
	for _, op := range openAPIOperations(t, filepath.Join("..", "..", "docs", "openapi.yaml")) {
		documented[op] = true
		if !served[op] {
			t.Errorf("docs/openapi.yaml describes %s, which apiRoutes does not serve: remove it, or serve it", op)
		}
	}
	for op := range served {
		if !documented[op] {
			t.Errorf("apiRoutes serves %s, which docs/openapi.yaml does not describe: add it (and a curl example to docs/api.md)", op)
		}
	}
	if len(served) == 0 {
		t.Fatal("apiRoutes registers no route")
	}
	t.Logf("%d routes, each described", len(served))
}

// openAPIOperations reads an OpenAPI file's operations as "METHOD /path".
func openAPIOperations(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		OpenAPI string                               `yaml:"openapi"`
		Paths   map[string]map[string]map[string]any `yaml:"paths"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.") {
		t.Fatalf("%s: openapi %q, want 3.x", file, doc.OpenAPI)
	}
	methods := []string{"get", "put", "post", "delete", "options", "head", "patch", "trace"}
	var ops []string
	for path, item := range doc.Paths {
		for key, op := range item {
			if !slices.Contains(methods, key) {
				continue // parameters, summary: not an operation
			}
			if _, ok := op["responses"]; !ok {
				t.Errorf("%s: %s %s has no responses", file, key, path)
			}
			ops = append(ops, strings.ToUpper(key)+" "+path)
		}
	}
	return ops
}
