package api

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"testing"

	yaml "go.yaml.in/yaml/v3"
)

// openAPITypes are the Go types docs/openapi.yaml's schemas describe, by
// schema name.
var openAPITypes = map[string]any{
	"Error": Error{}, "NodeInfo": NodeInfo{}, "Stats": Stats{},
	"RunRequest": RunRequest{}, "RunResponse": RunResponse{}, "Output": Output{},
	"Restart": Restart{}, "Checkpoint": Checkpoint{}, "CheckpointRequest": CheckpointRequest{},
	"RestartResponse": RestartResponse{}, "KillRequest": KillRequest{}, "KillResult": KillResult{},
	"Job": Job{}, "Migration": Migration{}, "Phase": Phase{}, "MigrateRequest": MigrateRequest{},
	"Event": Event{}, "PolicyRequest": PolicyRequest{}, "NodePolicy": NodePolicy{},
	"StdinResult": StdinResult{}, "PurgeRequest": PurgeRequest{}, "PurgeResult": PurgeResult{},
}

// The shapes docs/openapi.yaml gives are the ones the agent sends and
// takes: each object schema's properties are its Go type's JSON fields,
// no more and no fewer; the State enum is the job states; every $ref
// names a schema the file has.
func TestOpenAPISchemasAreTheTypes(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				Type       string         `yaml:"type"`
				Enum       []string       `yaml:"enum"`
				Properties map[string]any `yaml:"properties"`
			} `yaml:"schemas"`
		} `yaml:"components"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	schemas := doc.Components.Schemas
	for name, v := range openAPITypes {
		s, ok := schemas[name]
		if !ok {
			t.Errorf("docs/openapi.yaml has no schema %s (api.%s)", name, name)
			continue
		}
		var doc []string
		for p := range s.Properties {
			doc = append(doc, p)
		}
		sort.Strings(doc)
		if want := jsonFields(reflect.TypeOf(v)); !slices.Equal(doc, want) {
			t.Errorf("schema %s has properties %v; api.%s's JSON fields are %v", name, doc, name, want)
		}
	}
	for name := range schemas {
		if _, ok := openAPITypes[name]; !ok && name != "State" {
			t.Errorf("schema %s describes no type of package api: add it to openAPITypes, or remove it", name)
		}
	}
	states := []string{StateStarting, StateRunning, StateStopped, StateFinished, StateLost}
	sort.Strings(states)
	got := slices.Clone(schemas["State"].Enum)
	sort.Strings(got)
	if !slices.Equal(got, states) {
		t.Errorf("schema State is %v; the job states are %v", got, states)
	}
	text := string(b)
	for _, part := range strings.Split(text, `$ref: "#/components/`)[1:] {
		ref, _, _ := strings.Cut(part, `"`)
		kind, name, _ := strings.Cut(ref, "/")
		switch kind {
		case "schemas":
			if _, ok := schemas[name]; !ok {
				t.Errorf("$ref to schema %s, which the file does not have", name)
			}
		case "responses":
			if !strings.Contains(text, "\n  responses:\n    "+name+":") {
				t.Errorf("$ref to response %s, which the file does not have", name)
			}
		default:
			t.Errorf("$ref to %s: not a schema or a response", ref)
		}
	}
}

// jsonFields are the JSON names of a struct's fields, sorted.
func jsonFields(t reflect.Type) []string {
	var out []string
	for f := range t.Fields() {
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}
