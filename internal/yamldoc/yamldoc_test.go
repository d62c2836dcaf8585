package yamldoc

import (
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The line is the one of the --- that starts the document.
func TestSecondDocument(t *testing.T) {
	cases := map[string]int{
		"a: 1\n":                 0,
		"a: 1\n---\n":            0,
		"a: 1\n---\n# only\n":    0,
		"a: 1\n---\nb: 2\n":      2,
		"a: 1\n---\n---\nb: 2\n": 3,
		"a: 1\n---\n- x\n":       2,
	}
	for in, want := range cases {
		dec := yaml.NewDecoder(strings.NewReader(in))
		var first yaml.Node
		if err := dec.Decode(&first); err != nil {
			t.Fatalf("%q: %v", in, err)
		}
		got, err := SecondDocument(dec)
		if err != nil || got != want {
			t.Errorf("%q: line %d, %v; want line %d", in, got, err, want)
		}
	}
	dec := yaml.NewDecoder(strings.NewReader("a: 1\n---\nb: [\n"))
	var first yaml.Node
	_ = dec.Decode(&first)
	if _, err := SecondDocument(dec); err == nil {
		t.Error("a broken second document is no error")
	}
}
