package wire

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// decodeSet is what SetMember must equal: decode, set the member, Marshal.
func decodeSet(t testing.TB, raw []byte, name string, value []byte) []byte {
	t.Helper()
	obj, err := DecodeObject(raw)
	if err != nil {
		t.Fatalf("%q does not decode: %v", raw, err)
	}
	v, err := Decode(value)
	if err != nil {
		t.Fatalf("value %q: %v", value, err)
	}
	obj[name] = v
	out, err := Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Each pair: a canonical object, and it with "seq" set to 7.
const spliceCases = `
{}
{"seq":7}

{"id":"1","pad":"xx"}
{"id":"1","pad":"xx","seq":7}

{"a":1,"z":2}
{"a":1,"seq":7,"z":2}

{"z":2}
{"seq":7,"z":2}

{"a":1,"seq":3,"z":2}
{"a":1,"seq":7,"z":2}

{"seq":{"x":[1,2]}}
{"seq":7}

{"n":null,"s":"\"\\\n\r\t\b\f\u0001\u001f"}
{"n":null,"s":"\"\\\n\r\t\b\f\u0001\u001f","seq":7}

{"a":[],"b":{},"c":[{"x":-5000000000.0,"y":true}],"é":"ü 😀"}
{"a":[],"b":{},"c":[{"x":-5000000000.0,"y":true}],"seq":7,"é":"ü 😀"}

{"big":12345678901234567890123,"f":1.5,"g":1e+16,"h":1.5e-05,"z":-0.0}
{"big":12345678901234567890123,"f":1.5,"g":1e+16,"h":1.5e-05,"seq":7,"z":-0.0}

{"se":1,"seq0":2}
{"se":1,"seq":7,"seq0":2}
`

func TestSetMember(t *testing.T) {
	pairs := strings.Split(strings.TrimSpace(spliceCases), "\n\n")
	for _, pair := range pairs {
		raw, want, _ := strings.Cut(pair, "\n")
		out, ok := SetMember([]byte(raw), "seq", []byte("7"))
		if !ok || string(out) != want {
			t.Errorf("SetMember(%s) = %s, %v; want %s", raw, out, ok, want)
			continue
		}
		if slow := decodeSet(t, []byte(raw), "seq", []byte("7")); !bytes.Equal(out, slow) {
			t.Errorf("SetMember(%s) = %s, but decoding, setting and marshalling gives %s", raw, out, slow)
		}
		if !IsCanonicalObject([]byte(raw)) || !IsCanonicalObject(out) {
			t.Errorf("%s or %s not recognised as canonical", raw, out)
		}
	}
	if len(pairs) < 10 {
		t.Fatalf("only %d cases", len(pairs))
	}
}

// Bytes that are not canonical, valid JSON or not: refused by all three,
// one a line.
const notCanonical = `{"x":-0.5e+10}
{"f":1.50}
{"n":-0}
{"n":1e2}
{"n":2.5E-3}
{"n":1E+16}
{"n":100}x
{"a":01}
{"a":1.}
{"a":.5}
{"a":1e}
{"a":+1}
{"a":tru}
{"a":nul}
{
}
[]
"x"
null
 {}
{} 
{ }
{"a": 1}
{"a":1 }
{"b":1,"a":2}
{"a":1,"a":2}
{"a\u0062":1}
{"a":"\/"}
{"a":"\u0041"}
{"a":"\u000a"}
{"a":"\u001F"}
{"a":"\u00e9"}
{"a":"\ud83d\ude00"}
{"a":[1,]}
{"a":{"b":1,}}
{"a":1,}
{"a":1}{}
{"a":[1 ,2]}
{"a":{"y":1,"x":2}}
{"a":{"x":1,"x":1}}
{"a":"unterminated}
{"a":1`

func TestSpliceRefusesWhatIsNotCanonical(t *testing.T) {
	lines := strings.Split(notCanonical, "\n")
	lines = append(lines, "", "{\"a\":\"\x01\"}", "{\"a\":\"\xff\"}", "{\"\xff\":1}", "{\"a\"\x00:1}")
	for _, raw := range lines {
		if out, ok := SetMember([]byte(raw), "seq", []byte("1")); ok {
			t.Errorf("SetMember(%q) = %s", raw, out)
		}
		if _, _, ok := CanonicalMember([]byte(raw), "a"); ok {
			t.Errorf("CanonicalMember(%q) took it as canonical", raw)
		}
		if IsCanonicalObject([]byte(raw)) {
			t.Errorf("IsCanonicalObject(%q)", raw)
		}
	}
	for _, name := range []string{`s"q`, `s\q`, "s\nq", "s\xffq"} {
		if _, ok := SetMember([]byte(`{}`), name, []byte("1")); ok {
			t.Errorf("SetMember took the name %q, which needs escaping", name)
		}
	}
}

func TestCanonicalMember(t *testing.T) {
	raw := []byte(`{"a":[1,{"b":null}],"n":-2.5,"s":"x\"y","é":{}}`)
	for name, want := range map[string]string{
		"a": `[1,{"b":null}]`, "n": `-2.5`, "s": `"x\"y"`, "é": `{}`,
	} {
		v, present, ok := CanonicalMember(raw, name)
		if !ok || !present || string(v) != want {
			t.Errorf("CanonicalMember(%q) = %s, %v, %v; want %s", name, v, present, ok, want)
		}
		if v, _, _ := CanonicalMember(raw, name); cap(v) != len(v) {
			t.Errorf("CanonicalMember(%q): appending to the value would write into raw", name)
		}
	}
	for _, name := range []string{"", "b", "z", "ü", `s"`} {
		if v, present, ok := CanonicalMember(raw, name); !ok || present || v != nil {
			t.Errorf("CanonicalMember(%q) = %s, %v, %v; want absent", name, v, present, ok)
		}
	}
	if _, present, ok := CanonicalMember([]byte(`{}`), "a"); !ok || present {
		t.Errorf("{}: present=%v ok=%v", present, ok)
	}
}

// SetMember and IsCanonicalObject follow nesting equally deep, so that one
// accepts exactly what the other calls canonical.
func TestSpliceDepth(t *testing.T) {
	for levels := maxSpliceDepth - 2; levels <= maxSpliceDepth+2; levels++ {
		raw := []byte(`{"a":` + strings.Repeat("[", levels) + strings.Repeat("]", levels) + `}`)
		_, ok := SetMember(raw, "b", []byte("1"))
		_, _, readOK := CanonicalMember(raw, "a")
		if canonical := IsCanonicalObject(raw); ok != canonical || readOK != canonical {
			t.Errorf("%d levels: SetMember %v, CanonicalMember %v, IsCanonicalObject %v", levels, ok, readOK, canonical)
		}
	}
}

// What Marshal writes is recognised, so records written by flecht or by the
// Python library take the fast path.
func TestMarshalOutputIsCanonical(t *testing.T) {
	for _, v := range []any{
		Object{},
		Object{"id": "42", "pad": "xxxx"},
		map[string]any{"a": []any{json.Number("1"), "x\n\"y", nil, true, map[string]any{"k": json.Number("2.50")}}, "b": "ü\u0007"},
		map[string]any{"f": 0.1, "i": -3, "e": json.Number("1E400")[:3], "z": json.Number("-0")},
	} {
		b, err := Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if !IsCanonicalObject(b) {
			t.Errorf("Marshal wrote %s, not recognised as canonical", b)
		}
	}
}
