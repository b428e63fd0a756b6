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
	"WebToken": WebToken{}, "Sweep": Sweep{}, "SweepJob": SweepJob{},
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
	states := []string{StatePending, StateStarting, StateRunning, StateStopped, StateFinished, StateLost}
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
		if f.Anonymous && name == "" && f.Type.Kind() == reflect.Struct {
			// encoding/json puts an embedded struct's fields in its own.
			out = append(out, jsonFields(f.Type)...)
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

// Every parameter of docs/openapi.yaml is whole (only the keys a
// parameter has: a comma inside a flow mapping's unquoted text splits it
// into a key of its own), every {name} of a path is a required path
// parameter of each of its operations, and every path parameter is in its
// path.
func TestOpenAPIParameters(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "openapi.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []map[string]any `yaml:"parameters"`
		} `yaml:"paths"`
	}
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	keys := []string{"name", "in", "required", "description", "schema"}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			inPath := map[string]bool{}
			for _, p := range op.Parameters {
				for k := range p {
					if !slices.Contains(keys, k) {
						t.Errorf("%s %s: parameter %v has a key %q: quote its text", method, path, p["name"], k)
					}
				}
				name, _ := p["name"].(string)
				switch p["in"] {
				case "path":
					inPath[name] = true
					if p["required"] != true || !strings.Contains(path, "{"+name+"}") {
						t.Errorf("%s %s: path parameter %q not required, or not in the path", method, path, name)
					}
				case "query":
				default:
					t.Errorf("%s %s: parameter %q in %v", method, path, name, p["in"])
				}
			}
			for _, seg := range strings.Split(path, "/") {
				if strings.HasPrefix(seg, "{") && !inPath[strings.Trim(seg, "{}")] {
					t.Errorf("%s %s: %s is not a parameter", method, path, seg)
				}
			}
		}
	}
}
