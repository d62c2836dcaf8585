package attr

import (
	"bytes"
	"encoding/json"
	"testing"
)

// slowSet is what SetCanonicalMember must equal: decode, set, encode.
func slowSet(t *testing.T, raw []byte, name string, value []byte) []byte {
	t.Helper()
	ev, _, err := Decode[Event](raw)
	if err != nil {
		t.Fatalf("%q does not decode: %v", raw, err)
	}
	m := ev.Raw()
	v, err := ParseJSON(value)
	if err != nil {
		t.Fatal(err)
	}
	m[name] = v
	out, err := Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestSetCanonicalMember(t *testing.T) {
	for _, tc := range []struct {
		raw, want string
	}{
		{`{}`, `{"seq":7}`},
		{`{"id":"1","pad":"xx"}`, `{"id":"1","pad":"xx","seq":7}`},
		{`{"a":1,"z":2}`, `{"a":1,"seq":7,"z":2}`},
		{`{"z":2}`, `{"seq":7,"z":2}`},
		{`{"a":1,"seq":3,"z":2}`, `{"a":1,"seq":7,"z":2}`},
		{`{"seq":{"x":[1,2]}}`, `{"seq":7}`},
		{`{"s":"\"\\\n\r\t\b\f\u0001\u001f","n":null}`, ""}, // keys out of order
		{`{"n":null,"s":"\"\\\n\r\t\b\f\u0001\u001f"}`, `{"n":null,"s":"\"\\\n\r\t\b\f\u0001\u001f","seq":7}`},
		{`{"a":[],"b":{},"c":[{"x":-5000000000.0,"y":true}],"é":"ü 😀"}`, `{"a":[],"b":{},"c":[{"x":-5000000000.0,"y":true}],"seq":7,"é":"ü 😀"}`},
		{`{"big":12345678901234567890123,"f":1.5,"g":1e+16,"h":1.5e-05}`, `{"big":12345678901234567890123,"f":1.5,"g":1e+16,"h":1.5e-05,"seq":7}`},
		// Numbers Python spells otherwise are not canonical: the caller
		// decodes them, and Marshal writes Python's spelling.
		{`{"x":-0.5e+10}`, ""},
		{`{"f":1.50}`, ""},
		{`{"n":-0}`, ""},
		{`{"n":1e2}`, ""},
		{`{"n":2.5E-3}`, ""},
	} {
		out, ok := SetCanonicalMember([]byte(tc.raw), "seq", []byte("7"))
		if tc.want == "" {
			if ok {
				t.Errorf("%s: accepted as canonical: %s", tc.raw, out)
			}
			continue
		}
		if !ok {
			t.Errorf("%s: refused", tc.raw)
			continue
		}
		if string(out) != tc.want {
			t.Errorf("%s: got %s, want %s", tc.raw, out, tc.want)
		}
		if slow := slowSet(t, []byte(tc.raw), "seq", []byte("7")); !bytes.Equal(out, slow) {
			t.Errorf("%s: %s, but decode+set+encode gives %s", tc.raw, out, slow)
		}
	}
}

// Everything that is not canonical is refused, valid JSON or not: the
// caller decodes those (and tells the invalid ones apart).
func TestSetCanonicalMemberRefuses(t *testing.T) {
	for _, raw := range []string{
		``, `{`, `}`, `[]`, `"x"`, `null`, ` {}`, `{} `, `{ }`, `{"a": 1}`, `{"a":1 }`,
		`{"b":1,"a":2}`, `{"a":1,"a":2}`, `{"a\u0062":1}`, `{"a":"\/"}`, `{"a":"\u0041"}`,
		`{"a":"\u000a"}`, `{"a":"\u001F"}`, `{"a":"\u00e9"}`, `{"a":"\ud83d\ude00"}`, "{\"a\":\"\x01\"}",
		"{\"a\":\"\xff\"}", `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":+1}`, `{"a":tru}`,
		`{"a":[1,]}`, `{"a":{"b":1,}}`, `{"a":1,}`, `{"a":1}{}`, `{"a":[1 ,2]}`, `{"a":{"y":1,"x":2}}`,
	} {
		if out, ok := SetCanonicalMember([]byte(raw), "seq", []byte("1")); ok {
			t.Errorf("%q accepted: %s", raw, out)
		}
	}
	if _, ok := SetCanonicalMember([]byte(`{}`), `s"q`, []byte("1")); ok {
		t.Error("a name that needs escaping was accepted")
	}
}

// The canonical bytes Marshal writes are recognised, so records written
// by flecht or by the Python library take the fast path.
func TestMarshalOutputIsCanonical(t *testing.T) {
	for _, v := range []map[string]any{
		{},
		{"id": "42", "pad": "xxxx"},
		{"a": []any{json.Number("1"), "x\n\"y", nil, true, map[string]any{"k": json.Number("2.50")}}, "b": "ü\u0007"},
	} {
		b, err := Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if !isCanonicalObject(b) {
			t.Errorf("Marshal wrote %s, not recognised as canonical", b)
		}
	}
}

// FuzzSetCanonicalMember: whatever the bytes, the fast path either refuses
// or gives exactly what decoding, setting and encoding gives; and a value
// it calls canonical re-encodes to itself.
func FuzzSetCanonicalMember(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"id":"1","pad":"xx"}`, `{"a":1,"seq":3,"z":2}`, `{"a":[{"b":null}],"c":"\u0001"}`,
		`{"a":"\u00e9"}`, `{"a":1,"a":2}`, `{"b":1,"a":2}`, `{"a":-1.5E-3}`, "{\"a\":\"\xff\"}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		canonical := isCanonicalObject(raw)
		out, ok := SetCanonicalMember(raw, "seq", []byte("12"))
		if ok != canonical {
			t.Fatalf("%q: SetCanonicalMember ok=%v but isCanonicalObject=%v", raw, ok, canonical)
		}
		if !ok {
			return
		}
		ev, _, err := Decode[Event](raw)
		if err != nil {
			t.Fatalf("%q called canonical but does not decode: %v", raw, err)
		}
		again, err := ev.Bytes()
		if err != nil || !bytes.Equal(again, raw) {
			t.Fatalf("%q called canonical but encodes to %q (%v)", raw, again, err)
		}
		if slow := slowSet(t, raw, "seq", []byte("12")); !bytes.Equal(out, slow) {
			t.Fatalf("%q: fast %q, slow %q", raw, out, slow)
		}
	})
}

// isCanonicalObject reports whether raw is one JSON object in the canonical
// wire form (Marshal of its decoded value gives raw back byte for byte), by
// the check SetCanonicalMember makes: the fuzz target's oracle.
func isCanonicalObject(raw []byte) bool {
	if len(raw) < 2 || raw[0] != '{' {
		return false
	}
	end, ok := canonicalValue(raw, 0, 0)
	return ok && end == len(raw)
}
