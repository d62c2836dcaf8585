package wire

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"
)

// FuzzDecodeMarshal: whatever Decode accepts, Marshal writes; Decode reads
// that back to an equal value, and Marshal of it gives the same bytes. The
// splice functions agree with decoding: SetMember, when ok, gives what
// decoding, setting and marshalling gives, and CanonicalMember, when ok,
// reads the member Decode reads, as Marshal writes it.
func FuzzDecodeMarshal(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"a":1}`, `{"big":12345678901234567890,"p":1.50}`, `[1]`, `null`, `"x"`, `-0`,
		`{"a":"\ud83d\ude00"}`, `{"a":"\ud800"}`, "{\"a\":\"\xff\"}", `{"a":{"b":[true,false,null]}}`,
		`{"a":1} x`, ` { "k" : "v" } `, `{"a":"\u0000"}`, `{"a":1e999}`, `{"a":1,"seq":3,"z":2}`,
		`{"a":[{"b":null}],"c":"\u0001"}`, `{"a":-1.5E-3}`, `{"b":1,"a":2}`, `{"seq":[1.5,"x"]}`,
	} {
		f.Add([]byte(s), "seq")
	}
	f.Add([]byte(`{"":0,"é":1}`), "é")
	f.Add([]byte(`{"a":[]}`), "")
	f.Fuzz(func(t *testing.T, in []byte, name string) {
		v, err := Decode(in)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			if IsCanonicalObject(in) {
				t.Fatalf("%q: called canonical, but Decode refuses it: %v", in, err)
			}
			return
		}
		out, err := Marshal(v)
		if err != nil {
			t.Fatalf("%q decodes, but Marshal refuses it: %v", in, err)
		}
		back, err := Decode(out)
		if err != nil {
			t.Fatalf("Marshal wrote %q, which does not decode: %v", out, err)
		}
		if why := differ(v, back); why != "" {
			t.Fatalf("%q → %q: %s", in, out, why)
		}
		if again, err := Marshal(back); err != nil || !bytes.Equal(again, out) {
			t.Fatalf("not a fixed point:\n%q\n%q (%v)", out, again, err)
		}

		obj, isObject := v.(map[string]any)
		if canonical := IsCanonicalObject(in); canonical && !bytes.Equal(in, out) {
			t.Fatalf("%q called canonical, but Marshal writes %q", in, out)
		} else if isObject && !canonical && bytes.Equal(in, out) && depth(v) < maxSpliceDepth && plainKeys(v) {
			t.Fatalf("%q is what Marshal writes, but not called canonical", in)
		}

		value := []byte(`[1.5,"x"]`)
		if set, ok := SetMember(in, name, value); ok {
			want := decodeSet(t, in, name, value)
			if !bytes.Equal(set, want) {
				t.Fatalf("SetMember(%q, %q) = %q; decode+set+Marshal gives %q", in, name, set, want)
			}
		} else if IsCanonicalObject(in) && plainKey(name) {
			t.Fatalf("SetMember(%q, %q) refused a canonical object", in, name)
		}

		got, present, ok := CanonicalMember(in, name)
		if ok != IsCanonicalObject(in) {
			t.Fatalf("CanonicalMember(%q) ok=%v, IsCanonicalObject says otherwise", in, ok)
		}
		if ok {
			member, has := obj[name]
			if present != has {
				t.Fatalf("CanonicalMember(%q, %q) present=%v, decoded has it: %v", in, name, present, has)
			}
			if want, _ := Marshal(member); has && !bytes.Equal(got, want) {
				t.Fatalf("CanonicalMember(%q, %q) = %q, Marshal of the decoded member %q", in, name, got, want)
			}
		}
	})
}

// differ says how two JSON-native values differ as a Python reader sees
// them, or "" when they do not: numbers are the same when they mean the same
// int or float, which is when their canonical spellings are equal.
func differ(a, b any) string {
	switch x := a.(type) {
	case json.Number:
		y, ok := b.(json.Number)
		cx, errX := CanonicalNumber(string(x))
		cy, errY := CanonicalNumber(string(y))
		if !ok || errX != nil || errY != nil || cx != cy {
			return "number " + string(x) + " became " + Kind(b) + " " + cy
		}
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return "array became another " + Kind(b)
		}
		for i := range x {
			if why := differ(x[i], y[i]); why != "" {
				return why
			}
		}
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return "object became another " + Kind(b)
		}
		for k := range x {
			if why := differ(x[k], y[k]); why != "" {
				return "member " + k + ": " + why
			}
			if _, ok := y[k]; !ok {
				return "member " + k + " lost"
			}
		}
	default:
		if a != b {
			return Kind(a) + " changed"
		}
	}
	return ""
}
