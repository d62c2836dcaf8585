package wire

import (
	"encoding/json"
	"strings"
	"testing"
)

var validSeeds = []string{
	``, ` `, `{}`, `[]`, `{"a":1}`, ` {"a" : [1, 2.5e-3, -0, true, false, null, "x\"\\\/\b\f\n\r\t\u00e9"]} `,
	`{"a":1,}`, `[1,]`, `[1 2]`, `{"a"}`, `{"a":}`, `{1:2}`, `01`, `-`, `1.`, `1e`, `1e+`, `.5`, `+1`, `tru`, `nul`, `falsey`,
	`"\x"`, `"\u12"`, `"\u12G4"`, "\"a\x01\"", `"abc`, `[`, `]`, `{"a":[{"b":{}}]}`, `1 2`, `"\ud800"`, "\"\xff\"",
	`[[[[]]]]`, `{"a":{"a":{"a":[]}}}`, `-0.0E+00`, `123456789012345678901234567890`,
}

// validJSON agrees with encoding/json.Valid on every input.
func FuzzValidJSON(f *testing.F) {
	for _, s := range validSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if got, want := validJSON(in), json.Valid(in); got != want {
			t.Fatalf("validJSON(%q) = %v, encoding/json says %v", in, got, want)
		}
	})
}

func TestValidJSONSeedsAndDepth(t *testing.T) {
	for _, s := range validSeeds {
		if got, want := validJSON([]byte(s)), json.Valid([]byte(s)); got != want {
			t.Errorf("validJSON(%q) = %v, encoding/json says %v", s, got, want)
		}
	}
	for _, depth := range []int{9999, 10000, 10001} {
		in := []byte(strings.Repeat("[", depth) + strings.Repeat("]", depth))
		if got, want := validJSON(in), json.Valid(in); got != want {
			t.Errorf("nesting %d: validJSON %v, encoding/json %v", depth, got, want)
		}
	}
}
