package wire

import (
	"encoding/json"
	"errors"
	"os"
	"testing"
)

// testdata/canonical/vectors.json pins what the real Python library
// (flechtwerk 0.17.0) writes when a stage decodes a record value and writes
// it back, or where it fails. It is a copy of the file
// internal/attr/testdata/canonical/gen_vectors.py generates in the flecht
// repository, next to that script.
type vector struct {
	Name   string
	Output *string // what upstream writes back, if it does
	Error  *struct{ Stage, Type string }
	// The input, as text or (when it is not UTF-8) as the bytes
	// encoding/json decodes from base64.
	Text   *string `json:"input"`
	Binary []byte  `json:"input_base64"`
}

func (v vector) input() []byte {
	if v.Text != nil {
		return []byte(*v.Text)
	}
	return v.Binary
}

func loadVectors(t testing.TB) []vector {
	t.Helper()
	raw, err := os.ReadFile("testdata/canonical/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Flechtwerk string   `json:"flechtwerk"`
		Vectors    []vector `json:"vectors"`
	}
	if err := json.Unmarshal(raw, &file); err != nil {
		t.Fatal(err)
	}
	if file.Flechtwerk != "0.17.0" {
		t.Fatalf("vectors from flechtwerk %q, want 0.17.0", file.Flechtwerk)
	}
	return file.Vectors
}

// outcome sorts a vector: "written" when upstream writes it back, "deeper"
// when upstream runs out of recursion (Python's limit is far below
// encoding/json's 10000 levels, so the decoder takes it), and "refused"
// when upstream fails to decode or to write it.
func (v vector) outcome() string {
	switch {
	case v.Output != nil:
		return "written"
	case v.Error != nil && v.Error.Type == "RecursionError":
		return "deeper"
	case v.Error != nil:
		return "refused"
	}
	return ""
}

// Whatever upstream writes back, DecodeObject and Marshal write byte for
// byte the same, and SetMember's check recognises it as canonical. Where
// upstream fails on decode or on encode, DecodeObject refuses the input
// already.
func TestUpstreamVectors(t *testing.T) {
	tally := map[string]int{}
	for _, v := range loadVectors(t) {
		in, outcome := v.input(), v.outcome()
		tally[outcome]++
		obj, err := DecodeObject(in)
		if len(in) == 0 {
			// The record layer reads an empty Kafka value as {}; as JSON
			// it is nothing at all.
			if err == nil {
				t.Errorf("%s: Decode took empty input", v.Name)
			}
			obj, err = Object{}, nil
		}
		var out []byte
		if err == nil {
			out, err = obj.Bytes()
		}
		var de *DecodeError
		switch outcome {
		case "written":
			if err != nil || string(out) != *v.Output {
				t.Errorf("%s:\n  wire     %s (%v)\n  upstream %s", v.Name, out, err, *v.Output)
			} else if !IsCanonicalObject(out) && depth(obj) < maxSpliceDepth && plainKeys(obj) {
				t.Errorf("%s: %s is not recognised as canonical", v.Name, out)
			}
		case "deeper":
			if err != nil {
				t.Errorf("%s: %v", v.Name, err)
			}
		case "refused":
			if !errors.As(err, &de) {
				t.Errorf("%s: upstream fails at %s (%s); wire: %s, %v", v.Name, v.Error.Stage, v.Error.Type, out, err)
			}
		default:
			t.Fatalf("%s: neither output nor error", v.Name)
		}
	}
	if tally["written"] < 600 || tally["refused"] < 25 || tally["deeper"] < 1 {
		t.Errorf("too few vectors of some kind: %v", tally)
	}
}

// depth is how deeply v nests containers (a scalar is 0).
func depth(v any) int {
	d := 0
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			d = max(d, depth(e))
		}
		return d + 1
	case map[string]any:
		for _, e := range x {
			d = max(d, depth(e))
		}
		return d + 1
	case Object:
		return depth(map[string]any(x))
	}
	return 0
}

// plainKeys reports whether every member name in v is written without an
// escape, which the splice check wants.
func plainKeys(v any) bool {
	switch x := v.(type) {
	case []any:
		for _, e := range x {
			if !plainKeys(e) {
				return false
			}
		}
	case map[string]any:
		for k, e := range x {
			if !plainKey(k) || !plainKeys(e) {
				return false
			}
		}
	case Object:
		return plainKeys(map[string]any(x))
	}
	return true
}
