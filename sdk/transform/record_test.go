package transform

import (
	"testing"

	"github.com/flecht-dev/flecht/sdk/wire"
)

func TestStateReadsWithoutDecoding(t *testing.T) {
	st := State{raw: []byte(`{"a":{"n":[1,{"x":"}"}]},"b":"q\"\\uote,}","big":9223372036854775807,"f":2.5,"neg":-9223372036854775808,"seq":41,"t":true,"z":null}`)}
	for name, want := range map[string]int64{"seq": 41, "big": 9223372036854775807, "neg": -9223372036854775808} {
		if n, ok := st.Int(name); !ok || n != want {
			t.Errorf("Int(%s) = %d %v, want %d", name, n, ok, want)
		}
	}
	for _, name := range []string{"f", "b", "a", "z", "t", "missing"} {
		if n, ok := st.Int(name); ok {
			t.Errorf("Int(%s) = %d, true", name, n)
		}
	}
	if f, ok := st.Float("f"); !ok || f != 2.5 {
		t.Errorf("Float(f) = %v %v", f, ok)
	}
	if s, ok := st.String("b"); !ok || s != `q"\uote,}` {
		t.Errorf("String(b) = %q %v", s, ok)
	}
	if b, ok := st.Bool("t"); !ok || !b {
		t.Errorf("Bool(t) = %v %v", b, ok)
	}
	// Every member is found where the decoder finds it.
	obj, err := wire.DecodeObject(st.raw)
	if err != nil {
		t.Fatal(err)
	}
	for name, v := range obj {
		want, _ := wire.Marshal(v)
		got, present, ok := topMember(st.raw, name)
		if !ok || !present || string(got) != string(want) {
			t.Errorf("topMember(%s) = %s %v %v, want %s", name, got, present, ok, want)
		}
	}
	for _, bad := range []string{`{"seq":4`, `{"seq"}`, `[1]`, `{"a":"x`, `{`} {
		if _, present, ok := topMember([]byte(bad), "seq"); ok && present {
			t.Errorf("%s: a member found in a broken object", bad)
		}
	}
	// A state not in the canonical form (spaced) is decoded instead.
	spaced := State{raw: []byte(`{"seq": 41, "z" : [1, 2]}`)}
	if n, ok := spaced.Int("seq"); !ok || n != 41 {
		t.Errorf("a spaced state: %d %v", n, ok)
	}
	// An escaped name takes the decoding path.
	esc := State{raw: []byte(`{"a\"b":1,"seq":3}`)}
	if n, ok := esc.Int("seq"); !ok || n != 3 {
		t.Errorf("with an escaped name: %d %v", n, ok)
	}
	for _, raw := range []string{`{"seq":01}`, `{"seq":1e2}`, `{"seq":99999999999999999999}`, `{"seq":-}`} {
		if n, ok := (State{raw: []byte(raw)}).Int("seq"); ok {
			t.Errorf("%s: Int = %d", raw, n)
		}
	}
}

// FuzzTopMember: the scan never panics, and whatever it finds in a
// canonical object is what decoding finds.
func FuzzTopMember(f *testing.F) {
	f.Add([]byte(`{"a":{"b":[1,"]"]},"seq":41}`), "seq")
	f.Fuzz(func(t *testing.T, raw []byte, name string) {
		got, present, ok := topMember(raw, name)
		if !ok || !wire.IsCanonicalObject(raw) {
			return
		}
		obj, err := wire.DecodeObject(raw)
		if err != nil {
			t.Fatalf("canonical %s does not decode: %v", raw, err)
		}
		v, there := obj[name]
		if there != present {
			t.Fatalf("%s: %q present %v, decoded %v", raw, name, present, there)
		}
		if there {
			want, _ := wire.Marshal(v)
			if string(want) != string(got) {
				t.Fatalf("%s: %q = %s, decoded %s", raw, name, got, want)
			}
		}
	})
}
