package attr

import (
	"bytes"
	"testing"
	"unicode/utf8"
)

// FuzzDecodeObject: any bytes either decode to a record that re-encodes and
// re-decodes to the same canonical bytes, or fail with a *DecodeError. Never
// a panic, never a half-decoded record.
func FuzzDecodeObject(f *testing.F) {
	for _, s := range []string{
		``, `{}`, `{"a":1}`, `{"big":12345678901234567890,"p":1.50}`, `[1]`, `null`,
		`{"a":"\ud83d\ude00"}`, `{"a":"\ud800"}`, "{\"a\":\"\xff\"}", `{"a":{"b":[true,false,null]}}`,
		`{"a":1} x`, ` { "k" : "v" } `, `{"a":"\u0000"}`, `{"a":1e999}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		ev, tomb, err := Decode[Event](in)
		if err != nil {
			if _, ok := err.(*DecodeError); !ok {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if tomb {
			t.Fatal("non-nil input decoded as tombstone")
		}
		if !utf8.Valid(in) {
			t.Fatal("accepted invalid UTF-8")
		}
		b, err := ev.Bytes()
		if err != nil {
			t.Fatalf("decoded record does not encode: %v", err)
		}
		again, _, err := Decode[Event](b)
		if err != nil {
			t.Fatalf("canonical bytes do not decode: %v\n%q", err, b)
		}
		b2, _ := again.Bytes()
		if !bytes.Equal(b, b2) {
			t.Fatalf("canonical form not stable:\n%q\n%q", b, b2)
		}
		// The byte scanner must see the members the decoder saw.
		ms, err := Members(in)
		if err != nil {
			t.Fatalf("Members on a valid object: %v", err)
		}
		seen := map[string]int{}
		for _, m := range ms {
			seen[m.Key]++
		}
		if len(seen) != ev.Len() {
			t.Fatalf("scanner found %d distinct keys, decoder %d", len(seen), ev.Len())
		}
		for _, m := range ms {
			if seen[m.Key] > 1 {
				continue
			}
			v, err := LookupField(in, []string{m.Key})
			if err != nil || !bytes.Equal(v, m.Value) {
				t.Fatalf("LookupField(%q) = %q, %v; Members says %q", m.Key, v, err, m.Value)
			}
			want, _ := ev.RawValue(m.Key)
			wb, _ := Marshal(want)
			got, err := decodeJSONValue(m.Value)
			if err != nil {
				t.Fatalf("member value %q does not decode: %v", m.Value, err)
			}
			gb, _ := Marshal(got)
			if !bytes.Equal(wb, gb) {
				t.Fatalf("member %q: scanner value %s, decoder value %s", m.Key, gb, wb)
			}
		}
	})
}

// FuzzReplaceField: replacing a field in a valid object keeps every byte
// outside the value, and the result still decodes.
func FuzzReplaceField(f *testing.F) {
	f.Add([]byte(messy), "auth", "api_key", []byte(`"x"`))
	f.Add([]byte(`{"a":{"b":1}}`), "a", "b", []byte(`[1, {"c": "}"}]`))
	f.Add([]byte(`{"a":1}`), "a", "", []byte(`2`))
	f.Fuzz(func(t *testing.T, raw []byte, k1, k2 string, val []byte) {
		path := []string{k1}
		if k2 != "" {
			path = append(path, k2)
		}
		old, errLookup := LookupField(raw, path)
		out, err := ReplaceField(raw, path, val)
		if err != nil {
			return
		}
		if errLookup != nil {
			t.Fatalf("ReplaceField succeeded where LookupField failed: %v", errLookup)
		}
		i := bytes.Index(raw, old)
		if i < 0 {
			t.Fatal("looked-up value is not a slice of raw")
		}
		if _, _, err := DecodeObject(out); err != nil {
			t.Fatalf("result does not decode: %v\n%q", err, out)
		}
		got, err := LookupField(out, path)
		if err != nil || !bytes.Equal(got, bytes.Trim(val, " \t\r\n")) {
			t.Fatalf("replaced value reads back as %q, %v", got, err)
		}
		if len(out) != len(raw)-len(old)+len(bytes.Trim(val, " \t\r\n")) {
			t.Fatal("bytes outside the value changed length")
		}
	})
}
