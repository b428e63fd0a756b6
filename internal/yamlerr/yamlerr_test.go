package yamlerr

import (
	"errors"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

type section struct {
	N int `yaml:"n"`
}

type doc struct {
	A  string   `yaml:"a"`
	L  []string `yaml:"l"`
	S  section  `yaml:"s"`
	S2 section  `yaml:"s2"`
}

// Each decoding error names the key by its dotted name, its line, and
// the form the key takes.
func TestMessage(t *testing.T) {
	forms := map[string]string{"int": "a whole number", "yamlerr.section": "a section of keys"}
	for text, want := range map[string]string{
		"a: x\ns:\n  n: ten\n": `s.n (line 3): "ten" is not a whole number`,
		"s2: {n: [1]}\n":       "s2.n (line 1): a list is not a whole number",
		"s: 3\n":               `s (line 1): "3" is not a section of keys`,
		"a: x\nnosuch: 1\n":    "nosuch (line 2): not a known key",
		"s:\n  n: a\n  m: 1\n": `s.n (line 2): "a" is not a whole number (and 1 more)`,
		"a: [\n":               "yaml: line 1: did not find expected node content",
	} {
		var d doc
		dec := yaml.NewDecoder(strings.NewReader(text))
		dec.KnownFields(true)
		err := dec.Decode(&d)
		if err == nil {
			t.Errorf("%q decoded", text)
			continue
		}
		if got := Message([]byte(text), err, forms); got != want {
			t.Errorf("%q: %q, want %q", text, got, want)
		}
	}
	if got := Message(nil, errors.New("a\n  b"), nil); got != "a; b" {
		t.Errorf("another error: %q", got)
	}
}
